package fleetstatetest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/fleetstate/fleetstate"
	"pgregory.net/rapid"
)

// budgetModel is what a fleet's budgets should say, kept beside a real
// rendezvous by TestBudgetStateMachine.
type budgetModel struct {
	budgets map[string]fleetstate.Budget // by member, "" for the fleet's
	spent   map[string]int64             // each member's input plus output
	total   map[string]fleetstate.Usage  // each member's running total, as reported
	queue   map[string][]*modelTurn      // each member's turns not yet delivered
	open    map[string]*modelTurn        // each member's open turn
}

// modelTurn is a turn not yet ended, and what its member used while it
// was open.
type modelTurn struct {
	id   string
	used int64
}

var budgetMembers = []string{"scout", "miner"}

// covering returns the budgets that cover member: its own and the
// fleet's, by owner.
func (m *budgetModel) covering(member string) []string {
	var out []string
	for _, owner := range []string{member, ""} {
		if _, ok := m.budgets[owner]; ok {
			out = append(out, owner)
		}
	}
	return out
}

// spentOf returns what the budget of owner counts.
func (m *budgetModel) spentOf(owner string) int64 {
	if owner != "" {
		return m.spent[owner]
	}
	var n int64
	for _, s := range m.spent {
		n += s
	}
	return n
}

// reservedOf returns what the unfinished turns the budget of owner
// covers hold of it.
func (m *budgetModel) reservedOf(owner string) int64 {
	b := m.budgets[owner]
	var n int64
	for _, member := range budgetMembers {
		if owner != "" && member != owner {
			continue
		}
		turns := slices.Clone(m.queue[member])
		if t := m.open[member]; t != nil {
			turns = append(turns, t)
		}
		for _, t := range turns {
			n += max(int64(b.Reserve)-t.used, 0)
		}
	}
	return n
}

// held reports whether member may not start a turn.
func (m *budgetModel) held(member string) bool {
	for _, owner := range m.covering(member) {
		if m.spentOf(owner) >= m.budgets[owner].Tokens {
			return true
		}
	}
	return false
}

// fit returns how many sends to member its budgets admit now, at most n.
func (m *budgetModel) fit(member string, n int) int {
	for _, owner := range m.covering(member) {
		b := m.budgets[owner]
		left := b.Tokens - m.spentOf(owner)
		switch {
		case left <= 0:
			return 0
		case b.Reserve > 0:
			n = min(n, int(max((left-m.reservedOf(owner))/int64(b.Reserve), 0)))
		}
	}
	return n
}

// stop ends the open turns that a spent budget with Stop covers, as the
// rendezvous does when usage crosses it, but spare.
func (m *budgetModel) stop(spare string) {
	for owner, b := range m.budgets {
		if !b.Stop || m.spentOf(owner) < b.Tokens {
			continue
		}
		for _, member := range budgetMembers {
			if (owner == "" || owner == member) && m.open[member] != nil && m.open[member].id != spare {
				m.open[member] = nil
			}
		}
	}
}

// TestBudgetStateMachine: a rapid state machine of budgets set, raised
// and removed, usage reported, turns sent in concurrent bursts, taken,
// answered and stopped, and restarts, beside a model of what each budget
// should count. After every step the budgets' spend and holds are the
// model's, and each burst of concurrent sends is admitted exactly as
// many times as the budgets fit.
func testBudgetStateMachine(t *testing.T, s suite) {
	rapid.Check(t, func(rt *rapid.T) {
		f := s.newFleet(t, nil)
		defer func() { f.r.Close() }()
		for _, name := range budgetMembers {
			f.pull(name)
		}
		m := &budgetModel{budgets: map[string]fleetstate.Budget{}, spent: map[string]int64{},
			total: map[string]fleetstate.Usage{}, queue: map[string][]*modelTurn{}, open: map[string]*modelTurn{}}
		owner := rapid.SampledFrom([]string{"scout", "miner", ""})
		member := rapid.SampledFrom(budgetMembers)
		rt.Repeat(map[string]func(*rapid.T){
			"set budget": func(rt *rapid.T) {
				who := owner.Draw(rt, "owner")
				b := fleetstate.Budget{Tokens: rapid.Int64Range(1, 300).Draw(rt, "tokens"), Stop: rapid.Bool().Draw(rt, "stop")}
				if rapid.Bool().Draw(rt, "with reserve") {
					b.Reserve = float64(rapid.Int64Range(1, b.Tokens).Draw(rt, "reserve"))
				}
				if err := f.r.SetBudget(who, &b); err != nil {
					rt.Fatalf("SetBudget(%q, %+v): %v", who, b, err)
				}
				m.budgets[who] = b
				m.stop("")
			},
			"remove budget": func(rt *rapid.T) {
				who := owner.Draw(rt, "owner")
				if err := f.r.SetBudget(who, nil); err != nil {
					rt.Fatalf("SetBudget(%q, nil): %v", who, err)
				}
				delete(m.budgets, who)
			},
			"report usage": func(rt *rapid.T) {
				name := member.Draw(rt, "member")
				in, out := rapid.Int64Range(0, 60).Draw(rt, "input"), rapid.Int64Range(0, 20).Draw(rt, "output")
				total := m.total[name].Add(fleetstate.Usage{Input: in, Output: out})
				if err := f.r.ReportUsage(name, fleetstate.UsageReport{Source: "s", Total: total}); err != nil {
					rt.Fatalf("ReportUsage(%s, %+v): %v", name, total, err)
				}
				m.total[name] = total
				m.spent[name] += in + out
				if t := m.open[name]; t != nil {
					t.used += in + out
				}
				m.stop("")
			},
			"send a burst": func(rt *rapid.T) {
				name := member.Draw(rt, "member")
				n := rapid.IntRange(1, 6).Draw(rt, "senders")
				want := m.fit(name, n)
				var mu sync.Mutex
				var admitted []string
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() {
						o, err := f.r.SendDetached("lead", name, "work")
						switch {
						case err == nil:
							mu.Lock()
							admitted = append(admitted, o.TurnID)
							mu.Unlock()
						case fleetstate.CodeOf(err) != fleetstate.CodeBudgetExhausted:
							rt.Errorf("send to %s: %v", name, err)
						}
					})
				}
				wg.Wait()
				if len(admitted) != want {
					rt.Fatalf("%d of %d concurrent sends to %s admitted; want %d (budgets %+v, spent %+v, reserved %d and %d)",
						len(admitted), n, name, want, m.budgets, m.spent, m.reservedOf(name), m.reservedOf(""))
				}
				// The order of a burst's turns is the order they were queued
				// in, which the model does not know: their IDs are read back
				// as they are delivered.
				for range admitted {
					m.queue[name] = append(m.queue[name], &modelTurn{})
				}
			},
			"take the next turn": func(rt *rapid.T) {
				name := member.Draw(rt, "member")
				msg, ok, err := f.r.Next(context.Background(), name, 0)
				if err != nil {
					rt.Fatalf("Next(%s): %v", name, err)
				}
				m.open[name] = nil // Next ends an open turn first
				want := !m.held(name) && len(m.queue[name]) > 0
				if ok != want {
					rt.Fatalf("Next(%s) delivered %v; want %v (held %v, %d queued)", name, ok, want, m.held(name), len(m.queue[name]))
				}
				if ok {
					t := m.queue[name][0]
					m.queue[name] = m.queue[name][1:]
					t.id = msg.TurnID
					m.open[name] = t
				}
			},
			"reply with usage": func(rt *rapid.T) {
				name := member.Draw(rt, "member")
				t := m.open[name]
				if t == nil {
					rt.Skip("no open turn")
				}
				out := rapid.Int64Range(0, 40).Draw(rt, "output")
				total := m.total[name].Add(fleetstate.Usage{Output: out})
				if err := f.r.ReplyTurnUsage(name, t.id, "done", fleetstate.UsageReport{Source: "s", Total: total}); err != nil {
					rt.Fatalf("ReplyTurnUsage(%s, %s): %v", name, t.id, err)
				}
				m.total[name] = total
				m.spent[name] += out
				t.used += out
				m.stop(t.id)
				m.open[name] = nil
			},
			"restart": func(rt *rapid.T) {
				f.restart(nil, budgetMembers...)
				for _, name := range budgetMembers {
					if err := f.r.SetReady(name, true); err != nil {
						rt.Fatal(err)
					}
				}
			},
			"": func(rt *rapid.T) {
				got := map[string]fleetstate.BudgetState{}
				for _, st := range f.r.Budgets() {
					got[st.Member] = st
				}
				if len(got) != len(m.budgets) {
					rt.Fatalf("budgets %+v; want %+v", got, m.budgets)
				}
				for who, b := range m.budgets {
					st, ok := got[who]
					spent := m.spentOf(who)
					if !ok || st.Budget != b || st.Spent != float64(spent) || st.Held != (spent >= b.Tokens) {
						rt.Fatalf("the budget of %q = %+v; want %+v, %d spent", who, st, b, spent)
					}
				}
				for _, name := range budgetMembers {
					info := f.memberInfo(name)
					open := ""
					if t := m.open[name]; t != nil {
						open = t.id
					}
					if info.Queued != len(m.queue[name]) || info.OpenTurn != open || info.Usage.Counted() != m.spent[name] {
						rt.Fatalf("%s = %+v; want %d queued, turn %q open, %d used", name, info, len(m.queue[name]), open, m.spent[name])
					}
				}
			},
		})
	})
}
