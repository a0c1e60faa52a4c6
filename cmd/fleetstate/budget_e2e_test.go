package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
)

// budgetFleetFile gives m1 a budget of 1,000 tokens, the fleet one of
// 100,000.
const budgetFleetFile = `{"budget":{"tokens":100000},
	"agents":[{"name":"lead","role":"lead"},{"name":"m1","role":"member","budget":{"tokens":1000,"warn_at":50}},{"name":"m2","role":"member"}]}`

// TestBudgetFromTheFleetFile: the fleet file's budget holds m1's queued
// work once its usage crosses it, a send to it is refused
// ERR_BUDGET_EXHAUSTED naming the budget, a person is notified and sees
// it in fleetstate budget; the budget and the hold survive a restart of
// the daemon, the operator's raise lets the held work go on and
// survives a restart too, and a lead may read budgets but not set them.
func TestBudgetFromTheFleetFile(t *testing.T) {
	dir := t.TempDir()
	roster := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(roster, []byte(budgetFleetFile), 0o600); err != nil {
		t.Fatal(err)
	}
	notified := filepath.Join(t.TempDir(), "notified")
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "m1": "member", "m2": "member"})
	args := []string{"--roster", roster, "--notify", "cat >> " + notified + "; echo >> " + notified}
	f := &cliFleet{dir: dir, tokens: tokens, d: startDaemon(t, dir, args...)}
	f.op = dialOperator(t, dir, f.d.url)

	m1 := dialAs(t, f.d.url, tokens["m1"])
	if _, _, err := m1.Next(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	f.ok(t, "send", "m1", "first")
	f.ok(t, "send", "m1", "second")
	msg, ok, err := m1.Next(t.Context(), 30*time.Second)
	if err != nil || !ok || msg.Content != "first" {
		t.Fatalf("m1's next: %+v, %v, %v", msg, ok, err)
	}
	if err := m1.ReplyUsage(t.Context(), msg.TurnID, "done", fleetstate.UsageReport{Source: "m1-proc", Total: fleetstate.Usage{Input: 900, Output: 200}}); err != nil {
		t.Fatal(err)
	}
	refusedSend := func() {
		t.Helper()
		r := leadCLI(t, nil, "", "send", "m1", "third", "--dir", dir)
		if r.code == 0 || !strings.Contains(r.stderr, "ERR_BUDGET_EXHAUSTED") || !strings.Contains(r.stderr, "1000 tokens: 1100 spent") {
			t.Fatalf("send to m1 past its budget: exit %d, %q; want ERR_BUDGET_EXHAUSTED naming 1000 tokens, 1100 spent", r.code, r.stderr)
		}
	}
	refusedSend()
	if msg, ok, err := m1.Next(t.Context(), 2*time.Second); ok || err != nil {
		t.Fatalf("m1 past its budget was handed %+v, %v", msg, err)
	}
	var doc struct {
		Budgets []fleetstate.BudgetState `json:"budgets"`
	}
	jsonDoc(t, f.ok(t, "budget", "--json"), &doc)
	if len(doc.Budgets) != 2 || doc.Budgets[0].Member != "" || doc.Budgets[0].Tokens != 100000 ||
		doc.Budgets[1].Member != "m1" || doc.Budgets[1].Spent != 1100 || !doc.Budgets[1].Held {
		t.Fatalf("budget --json = %+v; want the fleet's and m1's, held at 1100", doc.Budgets)
	}
	if out := f.ok(t, "budget"); !strings.Contains(out, "m1") || !strings.Contains(out, "1,100 (110%)") || !strings.Contains(out, "spent: no new turns") {
		t.Errorf("budget printed:\n%s", out)
	}
	// A lead reads the budgets, and may not set them.
	lead := leadCLI(t, []string{"FLEET_TOKEN=" + tokens["lead"]}, "", "budget", "m1", "--tokens", "9999", "--url", f.d.url)
	if lead.code == 0 || !strings.Contains(lead.stderr, "ERR_NOT_PERMITTED") {
		t.Fatalf("a lead setting a budget: exit %d, %q; want ERR_NOT_PERMITTED", lead.code, lead.stderr)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		data, _ := os.ReadFile(notified)
		if strings.Contains(string(data), `"kind":"budget_warning"`) && strings.Contains(string(data), `"kind":"budget_exhausted"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("notifications: %s; want budget_warning and budget_exhausted", data)
		}
		time.Sleep(50 * time.Millisecond)
	}

	restart := func() {
		t.Helper()
		f.d.kill(syscall.SIGKILL)
		f.d = startDaemon(t, dir, args...)
		f.op = dialOperator(t, dir, f.d.url)
		m1 = dialAs(t, f.d.url, tokens["m1"])
	}
	restart()
	refusedSend()
	f.ok(t, "budget", "m1", "--tokens", "5000")
	msg, ok, err = m1.Next(t.Context(), 30*time.Second)
	if err != nil || !ok || msg.Content != "second" {
		t.Fatalf("after the raise, m1's next = %+v, %v, %v; want the held second brief", msg, ok, err)
	}
	restart()
	jsonDoc(t, f.ok(t, "budget", "--json"), &doc)
	if len(doc.Budgets) != 2 || doc.Budgets[1].Tokens != 5000 {
		t.Fatalf("budgets after a restart = %+v; want m1's raise kept", doc.Budgets)
	}
}

// TestBudgetInCostFromTheFleetFile: the fleet file's prices give each
// member's cost in members, by the model its usage names; a budget in
// cost refuses a send past it naming the cost, and holds a member whose
// model has no price, naming the model, until the operator gives the
// budget room; budget --json tells the prices.
func TestBudgetInCostFromTheFleetFile(t *testing.T) {
	dir := t.TempDir()
	roster := filepath.Join(t.TempDir(), "fleet.json")
	const file = `{"prices":{"big":{"input":3,"output":15},"small":{"input":1,"output":2}},
	"agents":[{"name":"lead","role":"lead"},{"name":"m1","role":"member","budget":{"cost":0.01}},{"name":"m2","role":"member","budget":{"cost":1}}]}`
	if err := os.WriteFile(roster, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "m1": "member", "m2": "member"})
	f := &cliFleet{dir: dir, tokens: tokens, d: startDaemon(t, dir, "--roster", roster)}
	f.op = dialOperator(t, dir, f.d.url)
	reply := func(member, model string, u fleetstate.Usage) {
		t.Helper()
		c := dialAs(t, f.d.url, tokens[member])
		f.ok(t, "send", member, "work")
		msg, ok, err := c.Next(t.Context(), 30*time.Second)
		if err != nil || !ok {
			t.Fatalf("%s's next: %v, %v", member, ok, err)
		}
		if err := c.ReplyUsage(t.Context(), msg.TurnID, "done", fleetstate.UsageReport{Source: member + "-proc", Model: model, Total: u}); err != nil {
			t.Fatal(err)
		}
	}
	// 1,000 input and 600 output tokens of big: 0.003 + 0.009 = 0.012.
	reply("m1", "big", fleetstate.Usage{Input: 1000, Output: 600})
	reply("m2", "unknown-model", fleetstate.Usage{Output: 10})
	var doc struct {
		Members []fleetstate.MemberInfo `json:"members"`
	}
	jsonDoc(t, f.ok(t, "members", "--json"), &doc)
	for _, m := range doc.Members {
		switch {
		case m.Name == "m1" && (m.Cost == nil || *m.Cost < 0.0119 || *m.Cost > 0.0121 || m.Unpriced):
			t.Errorf("m1 = %+v; want a cost of 0.012", m)
		case m.Name == "m2" && (m.Cost == nil || *m.Cost != 0 || !m.Unpriced):
			t.Errorf("m2 = %+v; want a cost of 0 and a model with no price", m)
		}
	}
	if out := f.ok(t, "members"); !strings.Contains(out, "1,000 in, 600 out, cost 0.012") {
		t.Errorf("members does not show m1's cost:\n%s", out)
	}
	for _, c := range []struct{ member, says string }{
		{"m1", `member "m1"'s budget of cost 0.01: 0.012 spent`},
		{"m2", `no price for model "unknown-model"`},
	} {
		r := leadCLI(t, nil, "", "send", c.member, "more", "--dir", dir)
		if r.code == 0 || !strings.Contains(r.stderr, "ERR_BUDGET_EXHAUSTED") || !strings.Contains(r.stderr, c.says) {
			t.Errorf("send to %s: exit %d, %q; want ERR_BUDGET_EXHAUSTED saying %s", c.member, r.code, r.stderr, c.says)
		}
	}
	var budgets struct {
		Budgets []fleetstate.BudgetState    `json:"budgets"`
		Prices  map[string]fleetstate.Price `json:"prices"`
	}
	jsonDoc(t, f.ok(t, "budget", "--json"), &budgets)
	if len(budgets.Budgets) != 2 || budgets.Budgets[0].Cost != 0.01 || !budgets.Budgets[0].Held ||
		len(budgets.Budgets[1].Unpriced) != 1 || budgets.Prices["big"].Output != 15 {
		t.Fatalf("budget --json = %+v; want m1's and m2's in cost, held, and the prices", budgets)
	}
	if out := f.ok(t, "budget"); !strings.Contains(out, "no price for unknown-model: no new turns") {
		t.Errorf("budget does not say m2's model has no price:\n%s", out)
	}
	f.ok(t, "budget", "m1", "--cost", "0.5")
	f.ok(t, "send", "m1", "after the raise")
}
