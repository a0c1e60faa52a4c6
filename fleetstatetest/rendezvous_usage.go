package fleetstatetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/fleetstate/fleetstate"
)

// usageOf returns member's usage as Members tells it.
func (f *fleet) usageOf(member string) fleetstate.Usage {
	f.t.Helper()
	for _, m := range f.r.Members() {
		if m.Name == member {
			return m.Usage
		}
	}
	f.t.Fatalf("%s is not among the members", member)
	return fleetstate.Usage{}
}

// report reports member's total from source, failing the test if it is
// refused.
func (f *fleet) report(member, source string, input, output int64) {
	f.t.Helper()
	if err := f.r.ReportUsage(member, fleetstate.UsageReport{Source: source, Total: fleetstate.Usage{Input: input, Output: output}}); err != nil {
		f.t.Fatalf("ReportUsage(%s, %s, %d, %d): %v", member, source, input, output, err)
	}
}

// outcomeUsage polls ticket and returns its outcome's usage, the zero
// Usage for none.
func (f *fleet) outcomeUsage(ticket string) fleetstate.Usage {
	f.t.Helper()
	o, err := f.r.Poll(context.Background(), "lead", ticket, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	if o.Kind != fleetstate.OutcomeReply {
		f.t.Fatalf("poll %s = %+v; want its reply", ticket, o)
	}
	if o.Usage == nil {
		return fleetstate.Usage{}
	}
	return *o.Usage
}

func wantUsage(t *testing.T, what string, got fleetstate.Usage, input, output int64) {
	t.Helper()
	if want := (fleetstate.Usage{Input: input, Output: output}); got != want {
		t.Errorf("%s = %+v; want %+v", what, got, want)
	}
}

// TestUsagePerMemberAndTurn: usage reported as running totals counts
// once, whatever repeats or comes late; the member's counts over its life,
// a turn's outcome what came while the turn was open.
func testUsagePerMemberAndTurn(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		f.report("scout", "a.jsonl", 10, 1) // before any turn: the member's alone
		a := f.send("scout", "first")
		msg := f.next("scout")
		sub, _ := f.r.Subscribe(0)
		defer sub.Close()
		f.report("scout", "a.jsonl", 30, 5)
		f.report("scout", "a.jsonl", 30, 5) // again: counts once
		f.report("scout", "a.jsonl", 20, 4) // late: counts nothing
		f.report("scout", "b.jsonl", 7, 7)  // another source adds
		// Each report that adds is published with the member's total and
		// its open turn; one that adds nothing is not.
		es := drain(sub)
		if got, want := kinds(es), "usage usage "; got != want {
			t.Fatalf("events of the reports %q; want %q", got, want)
		}
		for i, want := range []fleetstate.Usage{{Input: 30, Output: 5}, {Input: 37, Output: 12}} {
			if e := es[i]; e.Member != "scout" || e.TurnID != msg.TurnID || e.Usage == nil || *e.Usage != want {
				t.Errorf("usage event %d = %+v (usage %+v); want scout's total %+v in turn %s", i, e, e.Usage, want, msg.TurnID)
			}
		}
		if err := f.r.ReplyTurn("scout", msg.TurnID, "done"); err != nil {
			t.Fatal(err)
		}
		f.report("scout", "a.jsonl", 31, 5) // after the turn: the member's alone
		wantUsage(t, "the first turn's outcome", f.outcomeUsage(a.Ticket), 27, 11)
		wantUsage(t, "the member", f.usageOf("scout"), 38, 12)

		b := f.send("scout", "second")
		msg = f.next("scout")
		if err := f.r.ReplyTurn("scout", msg.TurnID, "nothing used"); err != nil {
			t.Fatal(err)
		}
		if o, _ := f.r.Poll(context.Background(), "lead", b.Ticket, 0); o.Usage != nil {
			t.Errorf("a turn that used nothing has usage %+v", *o.Usage)
		}
	})
}

// TestUsageSurvivesRestart: a member's usage, its sources' totals and an
// open turn's usage are kept across a restart of the owner: a total
// reported before it counts once after it, and the turn's outcome, and
// the outcome held after it ends, tell all the turn used.
func testUsageSurvivesRestart(t *testing.T, s suite) {
	synctest.Test(t, func(t *testing.T) {
		f := s.newFleet(t, nil)
		f.pull("scout")
		a := f.send("scout", "work")
		msg := f.next("scout")
		f.report("scout", "a.jsonl", 100, 10)
		f.restart(nil, "scout")
		wantUsage(t, "the member after a restart", f.usageOf("scout"), 100, 10)
		f.report("scout", "a.jsonl", 100, 10) // sent again across the restart: counts once
		f.report("scout", "a.jsonl", 150, 20)
		if err := f.r.ReplyTurn("scout", msg.TurnID, "done"); err != nil {
			t.Fatal(err)
		}
		f.restart(nil, "scout")
		wantUsage(t, "the turn's outcome after another restart", f.outcomeUsage(a.Ticket), 150, 20)
		wantUsage(t, "the member after another restart", f.usageOf("scout"), 150, 20)
	})
}

// TestUsageBadReports: a report with no source, a source too long, a
// negative count, a model's name too long, too many models, no report
// or an unknown member is refused with its code, and changes nothing,
// the good reports beside a bad one included.
func testUsageBadReports(t *testing.T, s suite) {
	s.inFleet(t, nil, func(t *testing.T, f *fleet) {
		f.pull("scout")
		f.report("scout", "a", 5, 5)
		good := fleetstate.UsageReport{Source: "b", Model: "m", Total: fleetstate.Usage{Input: 7}}
		many := []fleetstate.UsageReport{}
		for i := range 65 {
			many = append(many, fleetstate.UsageReport{Source: "c", Model: fmt.Sprint(i), Total: fleetstate.Usage{Output: 1}})
		}
		for _, tc := range []struct {
			member string
			reps   []fleetstate.UsageReport
			code   fleetstate.Code
		}{
			{"scout", []fleetstate.UsageReport{good, {Source: "", Total: fleetstate.Usage{Input: 1}}}, fleetstate.CodeInvalidArgument},
			{"scout", []fleetstate.UsageReport{good, {Source: strings.Repeat("s", 1025), Total: fleetstate.Usage{Input: 1}}}, fleetstate.CodeInvalidArgument},
			{"scout", []fleetstate.UsageReport{good, {Source: "a", Total: fleetstate.Usage{Input: 9, Output: -1}}}, fleetstate.CodeInvalidArgument},
			{"scout", []fleetstate.UsageReport{good, {Source: "a", Model: strings.Repeat("m", 257), Total: fleetstate.Usage{Input: 9}}}, fleetstate.CodeInvalidArgument},
			{"scout", many, fleetstate.CodeInvalidArgument},
			{"scout", nil, fleetstate.CodeInvalidArgument},
			{"nobody", []fleetstate.UsageReport{{Source: "a", Total: fleetstate.Usage{Input: 9}}}, fleetstate.CodeUnknownMember},
		} {
			wantCode(t, f.r.ReportUsage(tc.member, tc.reps...), tc.code)
		}
		wantUsage(t, "the member after bad reports", f.usageOf("scout"), 5, 5)
	})
}
