package fleetstatetest

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetstate/fleetstate"
	"pgregory.net/rapid"
)

// setBudget sets member's budget ("" for the fleet's), failing the test
// if it is refused.
func (f *fleet) setBudget(member string, b *fleetstate.Budget) {
	f.t.Helper()
	if err := f.r.SetBudget(member, b); err != nil {
		f.t.Fatalf("SetBudget(%q, %+v): %v", member, b, err)
	}
}

// refused sends to member and wants ErrBudgetExhausted from the budget
// of budgetOf ("" for the fleet's) with spent counted.
func (f *fleet) refused(member, budgetOf string, limit int64, spent float64) {
	f.t.Helper()
	_, err := f.r.SendDetached("lead", member, "more work")
	wantCode(f.t, err, fleetstate.CodeBudgetExhausted)
	if !errors.Is(err, fleetstate.ErrBudgetExhausted) {
		f.t.Errorf("the refusal %v is not ErrBudgetExhausted", err)
	}
	var be *fleetstate.BudgetError
	if !errors.As(err, &be) || be.Member != budgetOf || be.Tokens != limit || be.Spent != spent {
		f.t.Fatalf("the refusal's detail = %+v; want the budget of %q, %d tokens, %v spent", be, budgetOf, limit, spent)
	}
}

// waitNext calls Next for member again and again, each call waiting as
// long as a call may, and sends the first message on the channel.
func (f *fleet) waitNext(member string) <-chan fleetstate.Message {
	got := make(chan fleetstate.Message, 1)
	go func() {
		for {
			m, ok, err := f.r.Next(context.Background(), member, time.Hour)
			if err != nil {
				if fleetstate.CodeOf(err) != fleetstate.CodeClosed {
					f.t.Errorf("Next(%s): %v", member, err)
				}
				return
			}
			if ok {
				got <- m
				return
			}
		}
	}()
	return got
}

// memberInfo returns member as Members tells it.
func (f *fleet) memberInfo(member string) fleetstate.MemberInfo {
	f.t.Helper()
	for _, m := range f.r.Members() {
		if m.Name == member {
			return m
		}
	}
	f.t.Fatalf("%s is not among the members", member)
	return fleetstate.MemberInfo{}
}

// TestBudgetRefusesSends: a send to a member whose budget, or the
// fleet's, is spent is refused with ERR_BUDGET_EXHAUSTED naming the
// budget, its limit and the spend, and queues nothing; a raised budget
// takes sends again.
func testBudgetRefusesSends(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		f.pull("miner")
		f.setBudget("scout", &fleetstate.Budget{Tokens: 100})
		f.report("scout", "a", 60, 39)
		f.send("scout", "one") // 99 spent: room left
		f.report("scout", "a", 60, 40)
		f.refused("scout", "scout", 100, 100)
		if m := f.memberInfo("scout"); m.Queued != 1 || m.Budget == nil || !m.Budget.Held || m.Budget.Spent != 100 {
			t.Errorf("scout after the refusal = %+v (budget %+v); want the one turn queued, held at 100", m, m.Budget)
		}
		f.send("miner", "dig") // another member's budget is its own
		f.setBudget("", &fleetstate.Budget{Tokens: 150})
		f.report("miner", "m", 25, 25)
		f.refused("miner", "", 150, 150)
		f.setBudget("", &fleetstate.Budget{Tokens: 1000})
		f.setBudget("scout", &fleetstate.Budget{Tokens: 200})
		f.send("scout", "two")
		f.send("miner", "three")
		// Bad budgets are refused and change nothing.
		for _, b := range []*fleetstate.Budget{{Tokens: 0}, {Tokens: 10, Per: "week"}, {Tokens: 10, Reserve: 20}} {
			wantCode(t, f.r.SetBudget("scout", b), fleetstate.CodeInvalidArgument)
		}
		wantCode(t, f.r.SetBudget("bad::name", &fleetstate.Budget{Tokens: 1}), fleetstate.CodeInvalidAgentName)
		if b := f.memberInfo("scout").Budget; b == nil || b.Tokens != 200 {
			t.Errorf("scout's budget after bad ones = %+v; want 200 tokens", b)
		}
		f.setBudget("scout", nil)
		if b := f.memberInfo("scout").Budget; b != nil {
			t.Errorf("scout's budget after its removal = %+v", b)
		}
	})
}

// TestBudgetHoldsQueuedWork: a member that crosses its budget mid-turn
// finishes that turn, but its queued turns wait, held and not lost; a
// raised budget lets them go on, to a Next already waiting too.
func testBudgetHoldsQueuedWork(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		f.setBudget("scout", &fleetstate.Budget{Tokens: 100})
		a := f.send("scout", "first")
		b := f.send("scout", "second")
		msg := f.next("scout")
		f.report("scout", "a", 90, 20) // crosses mid-turn
		if err := f.r.ReplyTurn("scout", msg.TurnID, "done"); err != nil {
			t.Fatal(err)
		}
		wantKind(t, f.poll(a.Ticket), fleetstate.OutcomeReply)
		got := f.waitNext("scout")
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		select {
		case m := <-got:
			t.Fatalf("a member over its budget was handed %+v", m)
		default:
		}
		if p := f.poll(b.Ticket); p.State != fleetstate.TicketQueued {
			t.Fatalf("the held turn = %+v; want queued", p)
		}
		f.setBudget("scout", &fleetstate.Budget{Tokens: 500})
		synctest.Wait()
		select {
		case m := <-got:
			if m.Content != "second" {
				t.Fatalf("after the raise, Next = %+v; want the second brief", m)
			}
		default:
			t.Fatal("the raised budget did not release the held turn to the waiting Next")
		}
	})
}

// TestBudgetEvents: the spend crossing the warning share and the limit is
// published once each, with the budget and its spend; setting a budget
// is published too.
func testBudgetEvents(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		sub, _ := f.r.Subscribe(0)
		defer sub.Close()
		f.setBudget("scout", &fleetstate.Budget{Tokens: 100, WarnAt: 50})
		f.report("scout", "a", 40, 0)
		f.report("scout", "a", 55, 0) // warns
		f.report("scout", "a", 60, 0)
		f.report("scout", "a", 60, 45) // exhausts
		f.report("scout", "a", 61, 45)
		var kinds []fleetstate.EventKind
		var last fleetstate.Event
		for _, e := range drain(sub) {
			if e.Kind != fleetstate.EventUsage {
				kinds = append(kinds, e.Kind)
				last = e
				if e.Member != "scout" || e.Budget == nil || e.Budget.Tokens != 100 {
					t.Errorf("%s event = %+v (budget %+v); want scout's budget", e.Kind, e, e.Budget)
				}
			}
		}
		want := []fleetstate.EventKind{fleetstate.EventBudgetSet, fleetstate.EventBudgetWarning, fleetstate.EventBudgetExhausted}
		if !equalKinds(kinds, want) {
			t.Fatalf("budget events %v; want %v", kinds, want)
		}
		if last.Budget.Spent != 105 || !last.Budget.Held {
			t.Errorf("the exhaustion's budget = %+v; want 105 spent, held", last.Budget)
		}
	})
}

func equalKinds(a, b []fleetstate.EventKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBudgetSurvivesRestart: budgets, what they counted and the work they
// hold are kept across a restart of the owner; a raise after it releases
// the held work.
func testBudgetSurvivesRestart(t *testing.T, s suite) {
	synctest.Test(t, func(t *testing.T) {
		f := s.newFleet(t, nil)
		f.pull("scout")
		f.setBudget("scout", &fleetstate.Budget{Tokens: 100})
		f.setBudget("", &fleetstate.Budget{Tokens: 1000, Per: "day"})
		f.send("scout", "first")
		b := f.send("scout", "second")
		msg := f.next("scout")
		f.report("scout", "a", 100, 5)
		if err := f.r.ReplyTurn("scout", msg.TurnID, "done"); err != nil {
			t.Fatal(err)
		}
		f.restart(nil, "scout")
		if bs := f.r.Budgets(); len(bs) != 2 || bs[0].Member != "" || bs[0].Per != "day" || bs[0].Spent != 105 || bs[1].Spent != 105 || !bs[1].Held {
			t.Fatalf("budgets after a restart = %+v; want the fleet's per day and scout's held, 105 spent each", bs)
		}
		f.refused("scout", "scout", 100, 105)
		if _, ok, err := f.r.Next(context.Background(), "scout", time.Second); ok || err != nil {
			t.Fatalf("Next of a held member after a restart = %v, %v; want nothing", ok, err)
		}
		f.setBudget("scout", &fleetstate.Budget{Tokens: 200})
		if m := f.next("scout"); m.TurnID != b.TurnID {
			t.Fatalf("after the raise, Next = %+v; want the held turn %s", m, b.TurnID)
		}
	})
}

// TestBudgetRenewsDaily: a daily budget counts what was used since 00:00
// UTC; the work it held goes on when the day turns, to a Next waiting.
func testBudgetRenewsDaily(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		f.setBudget("scout", &fleetstate.Budget{Tokens: 100, Per: "day"})
		f.send("scout", "first")
		b := f.send("scout", "second")
		msg := f.next("scout")
		f.report("scout", "a", 150, 0)
		if err := f.r.ReplyTurn("scout", msg.TurnID, "done"); err != nil {
			t.Fatal(err)
		}
		f.refused("scout", "scout", 100, 150)
		got := f.waitNext("scout")
		now := time.Now().UTC()
		midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
		time.Sleep(midnight.Sub(now) - time.Second)
		synctest.Wait()
		if len(got) != 0 {
			t.Fatal("the held turn went before the day turned")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case m := <-got:
			if m.TurnID != b.TurnID {
				t.Fatalf("at the new day, Next = %+v; want the held turn", m)
			}
		default:
			t.Fatal("the new day did not release the held turn")
		}
		if st := f.memberInfo("scout").Budget; st == nil || st.Spent != 0 || st.Held {
			t.Errorf("the budget on the new day = %+v; want nothing spent", st)
		}
	})
}

// TestBudgetReserve: with a reserve per turn, exactly the turns that fit
// beside the spend are admitted, and a turn's own use comes out of its
// reserve.
func testBudgetReserve(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		f.setBudget("scout", &fleetstate.Budget{Tokens: 100, Reserve: 30})
		f.report("scout", "a", 5, 5)
		f.send("scout", "one")
		f.send("scout", "two")
		f.send("scout", "three") // 10 + 3*30 = 100
		f.refused("scout", "scout", 100, 10)
		msg := f.next("scout")
		f.report("scout", "a", 25, 5) // the open turn used 20 of its 30
		f.refused("scout", "scout", 100, 30)
		if err := f.r.ReplyTurn("scout", msg.TurnID, "done"); err != nil {
			t.Fatal(err)
		}
		// 30 spent, the two queued turns hold 30 each: no room for a 30.
		f.refused("scout", "scout", 100, 30)
	})
}

// TestBudgetStopsTheTurn: with Stop, the member's usage crossing its
// budget mid-turn ends the open turn failed, budget_exhausted, and
// interrupts the member's work; a budget without Stop lets the turn
// finish.
func testBudgetStopsTheTurn(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		lm := f.local("worker")
		f.setBudget("worker", &fleetstate.Budget{Tokens: 100, Stop: true})
		a := f.send("worker", "long work")
		if got := recv(lm); got != "long work" {
			t.Fatalf("got %q", got)
		}
		lm.SetStatus(fleetstate.StatusWorking)
		f.report("worker", "a", 60, 0)
		settle(time.Second)
		if o := f.poll(a.Ticket); o.State == fleetstate.TicketDone || lm.Interrupts() != 0 {
			t.Fatalf("below the budget: turn %+v, %d interrupts; want it working", o, lm.Interrupts())
		}
		f.report("worker", "a", 90, 15)
		settle(time.Second)
		o := f.poll(a.Ticket)
		if o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonBudgetExhausted || o.Usage == nil || o.Usage.Counted() != 105 {
			t.Fatalf("the turn past a stopping budget = %+v; want failed budget_exhausted, 105 tokens used", o)
		}
		if n := lm.Interrupts(); n != 1 {
			t.Errorf("%d interrupts; want 1", n)
		}

		f.pull("scout")
		f.setBudget("scout", &fleetstate.Budget{Tokens: 100})
		b := f.send("scout", "work")
		msg := f.next("scout")
		f.report("scout", "s", 200, 0)
		if err := f.r.ReplyTurn("scout", msg.TurnID, "done anyway"); err != nil {
			t.Fatalf("reply past a budget without stop: %v", err)
		}
		wantKind(t, f.poll(b.Ticket), fleetstate.OutcomeReply)

		// Usage reported with the reply counts in the turn, and the reply
		// it crosses a stopping budget with is not lost.
		f.pull("closer")
		f.setBudget("closer", &fleetstate.Budget{Tokens: 100, Stop: true})
		c := f.send("closer", "work")
		msg = f.next("closer")
		if err := f.r.ReplyTurnUsage("closer", msg.TurnID, "all done", fleetstate.UsageReport{Source: "c", Total: fleetstate.Usage{Input: 150, Output: 5}}); err != nil {
			t.Fatalf("a reply with usage past a stopping budget: %v", err)
		}
		if o := f.poll(c.Ticket); o.Kind != fleetstate.OutcomeReply || o.Content != "all done" || o.Usage == nil || o.Usage.Counted() != 155 {
			t.Errorf("the reply with usage = %+v; want the reply, 155 tokens used", o)
		}
	})
}

// TestBudgetConcurrentSends: sends racing for the last of a budget are
// admitted exactly as many times as their reserves fit: the check and the
// queueing are one step.
func testBudgetConcurrentSends(t *testing.T, s suite) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.Int64Range(1, 400).Draw(rt, "limit")
		reserve := rapid.Int64Range(1, limit).Draw(rt, "reserve")
		spent := rapid.Int64Range(0, limit).Draw(rt, "spent")
		senders := rapid.IntRange(1, 12).Draw(rt, "senders")
		fleetWide := rapid.Bool().Draw(rt, "fleet")
		f := s.newFleet(t, nil)
		defer f.r.Close()
		f.pull("scout")
		f.pull("miner")
		owner := "scout"
		if fleetWide {
			owner = ""
		}
		f.setBudget(owner, &fleetstate.Budget{Tokens: limit, Reserve: float64(reserve)})
		if spent > 0 {
			f.report("scout", "a", spent, 0)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		admitted := 0
		for i := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				to := "scout"
				if fleetWide && i%2 == 1 {
					to = "miner"
				}
				_, err := f.r.SendDetached("lead", to, "work")
				switch {
				case err == nil:
					mu.Lock()
					admitted++
					mu.Unlock()
				case fleetstate.CodeOf(err) != fleetstate.CodeBudgetExhausted:
					rt.Errorf("send: %v", err)
				}
			}()
		}
		wg.Wait()
		fit := int64(0)
		if spent < limit {
			fit = (limit - spent) / reserve
		}
		if want := min(int64(senders), fit); int64(admitted) != want {
			rt.Fatalf("%d of %d sends admitted by a budget of %d with %d spent and %d reserved per turn; want %d",
				admitted, senders, limit, spent, reserve, want)
		}
	})
}

// reportModel reports member's total of model from source, failing the
// test if it is refused.
func (f *fleet) reportModel(member, source, model string, u fleetstate.Usage) {
	f.t.Helper()
	if err := f.r.ReportUsage(member, fleetstate.UsageReport{Source: source, Model: model, Total: u}); err != nil {
		f.t.Fatalf("ReportUsage(%s, %s, %s, %+v): %v", member, source, model, u, err)
	}
}

// TestBudgetInCost: a budget in cost prices each model's usage at the
// prices of the moment, "*" pricing the models not named; a model with no
// price holds the budget, as if spent, until it has one; the member's
// cost is shown; prices and what they priced survive a restart.
func testBudgetInCost(t *testing.T, s suite) {
	synctest.Test(t, func(t *testing.T) {
		f := s.newFleet(t, nil)
		f.pull("scout")
		if err := f.r.SetPrices(map[string]fleetstate.Price{"": {Input: 1}}); fleetstate.CodeOf(err) != fleetstate.CodeInvalidArgument {
			t.Fatalf("SetPrices of a model with no name = %v; want ERR_INVALID_ARGUMENT", err)
		}
		// Per million tokens: big costs 0.01 for 1,000 output tokens.
		prices := map[string]fleetstate.Price{"big": {Input: 2, Output: 10, CacheRead: 1}, "small": {Input: 1, Output: 1}}
		if err := f.r.SetPrices(prices); err != nil {
			t.Fatal(err)
		}
		f.setBudget("scout", &fleetstate.Budget{Cost: 0.02})
		f.reportModel("scout", "t", "big", fleetstate.Usage{Input: 1000, Output: 1000, CacheRead: 2000}) // 0.002+0.01+0.002
		f.reportModel("scout", "t", "small", fleetstate.Usage{Input: 2000, Output: 1000})                // 0.003
		near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
		if m := f.memberInfo("scout"); m.Cost == nil || !near(*m.Cost, 0.017) || m.Unpriced || m.Budget == nil || !near(m.Budget.Spent, 0.017) || m.Budget.Held {
			t.Fatalf("scout after 0.017 of use = %+v (budget %+v); want cost and spend 0.017, not held", m, m.Budget)
		}
		first := f.send("scout", "first")
		// A model with no price holds the budget, and says which.
		f.reportModel("scout", "t", "odd", fleetstate.Usage{Output: 1})
		_, err := f.r.SendDetached("lead", "scout", "more")
		var be *fleetstate.BudgetError
		if !errors.As(err, &be) || !slices.Equal(be.Unpriced, []string{"odd"}) || !be.Held || !strings.Contains(err.Error(), `"odd"`) {
			t.Fatalf("a send past a model with no price = %v (%+v); want ERR_BUDGET_EXHAUSTED naming odd", err, be)
		}
		if _, ok, err := f.r.Next(context.Background(), "scout", time.Second); ok || err != nil {
			t.Fatalf("Next of a member held by a model with no price = %v, %v; want nothing", ok, err)
		}
		// A price for any model releases it, and prices odd from then on.
		prices["*"] = fleetstate.Price{Output: 1000}
		if err := f.r.SetPrices(prices); err != nil {
			t.Fatal(err)
		}
		if m := f.next("scout"); m.TurnID != first.TurnID {
			t.Fatalf("after a price for any model, Next = %+v; want %s", m, first.TurnID)
		}
		if m := f.memberInfo("scout"); m.Cost == nil || !near(*m.Cost, 0.018) || m.Unpriced {
			t.Fatalf("scout's cost with odd at 1000 per million = %v, unpriced %v; want 0.018", m.Cost, m.Unpriced)
		}
		// Crossing the limit in cost refuses sends, as in tokens.
		f.reportModel("scout", "t", "big", fleetstate.Usage{Input: 1000, Output: 1200, CacheRead: 2000}) // +0.002
		f.restart(nil, "scout")
		if p := f.r.Prices(); len(p) != 3 || p["*"].Output != 1000 {
			t.Fatalf("prices after a restart = %+v; want the three set", p)
		}
		_, err = f.r.SendDetached("lead", "scout", "more")
		if !errors.As(err, &be) || be.Cost != 0.02 || !near(be.Spent, 0.020) || len(be.Unpriced) != 0 || !strings.Contains(err.Error(), "cost 0.02") {
			t.Fatalf("a send past the cost after a restart = %v (%+v); want ERR_BUDGET_EXHAUSTED of cost 0.02, 0.02 spent", err, be)
		}
		// Prices changed price what was used before them too.
		prices["big"] = fleetstate.Price{}
		if err := f.r.SetPrices(prices); err != nil {
			t.Fatal(err)
		}
		if st := f.memberInfo("scout").Budget; st == nil || !near(st.Spent, 0.004) || st.Held {
			t.Fatalf("the budget with big free = %+v; want 0.004 spent (small and odd), not held", st)
		}
	})
}
