package mcphttp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// TestHTTPOperatorTokenActsAsOperatorLead has the operator token, given as
// mcphttp.Options.Operator, call the lead's tools as the lead named
// OperatorAgent: its send reaches the member from "operator", its ticket
// is its own and not another lead's; without the option the same token is
// refused.
func TestHTTPOperatorTokenActsAsOperatorLead(t *testing.T) {
	const operator = "fso_the-operator-token-of-this-test"
	k := adaptertest.Start(t, adaptertest.Options{
		Agents: map[string]mcpadapter.Role{"lead": mcpadapter.RoleLead, "scout": mcpadapter.RoleMember},
		HTTP:   mcphttp.Options{Operator: operator},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op, err := mcpadapter.Dial(ctx, k.URL, operator, "operator-test")
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	sent, err := op.SendDetached(ctx, "scout", "from a person")
	if err != nil || sent.Ticket == "" {
		t.Fatalf("the operator's fleet_send: %+v, %v; want a ticket", sent, err)
	}
	scout, err := mcpadapter.Dial(ctx, k.URL, k.Token["scout"], "scout")
	if err != nil {
		t.Fatal(err)
	}
	defer scout.Close()
	msg, ok, err := scout.Next(ctx, 5*time.Second)
	if err != nil || !ok || msg.From != mcpadapter.OperatorAgent || msg.Content != "from a person" {
		t.Fatalf("scout's fleet_next: %+v, %v, %v; want the brief from %q", msg, ok, err, mcpadapter.OperatorAgent)
	}
	lead, err := mcpadapter.Dial(ctx, k.URL, k.Token["lead"], "lead")
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Close()
	if _, err := lead.Poll(ctx, sent.Ticket, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Errorf("another lead polls the operator's ticket: %v; want ERR_UNKNOWN_TICKET", err)
	}
	if o, err := op.Poll(ctx, sent.Ticket, 0); err != nil || o.State != fleetstate.TicketWorking {
		t.Errorf("the operator polls its ticket: %+v, %v; want working", o, err)
	}

	// A handler without the option knows no operator.
	plain := adaptertest.Start(t, adaptertest.Options{
		Agents: map[string]mcpadapter.Role{"scout": mcpadapter.RoleMember},
	})
	if c, err := mcpadapter.Dial(ctx, plain.URL, operator, "operator-test"); err == nil {
		c.Close()
		t.Fatal("a handler without mcphttp.Options.Operator admitted the operator token")
	} else if !strings.Contains(err.Error(), "authorization required") {
		t.Errorf("dial with an unknown operator token: %v; want authorization required", err)
	}
}
