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
	if err := m1.ReplyUsage(t.Context(), msg.TurnID, "done", "m1-proc", fleetstate.Usage{Input: 900, Output: 200}); err != nil {
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
