package daemon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/natstest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// TestTokenAddedIsMemberAtOnce: an agent given a member token by
// `fleetstate token add` (another writer of the token file) is a member
// for the very next send, not from the membership's next look at the
// file: twenty sends, each right after its member's token was added,
// are all queued.
func TestTokenAddedIsMemberAtOnce(t *testing.T) {
	dir := t.TempDir()
	lead := addToken(t, dir, "lead", "lead")
	url := startDaemon(t, serveConfig(dir))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dial(t, ctx, url, lead)
	// The daemon has looked at the file since the lead's token: a call
	// of the lead succeeded.
	if _, err := c.Members(ctx); err != nil {
		t.Fatal(err)
	}
	sendRightAfterAdd(t, ctx, c, func(name string) { addToken(t, dir, name, "member") })
}

// TestTokenAddedIsMemberAtOnceNATS: the same on NATS, the token added to
// the fleet's configuration bucket as `fleetstate token add --nats` adds
// it, which the owner's watch of the bucket may not have brought yet.
func TestTokenAddedIsMemberAtOnceNATS(t *testing.T) {
	nats := &daemon.NATSConfig{URL: natstest.Run(t).URL(), Fleet: "late"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tokens, closeTokens, err := nats.OpenTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeTokens()
	lead, err := tokens.Add("lead", mcpadapter.RoleLead)
	if err != nil {
		t.Fatal(err)
	}
	cfg := serveConfig("")
	cfg.NATS = nats
	url := startDaemon(t, cfg)
	var c *mcpadapter.Client
	// The daemon serves once it owns the fleet.
	if !fleettest.Until(15*time.Second, 50*time.Millisecond, func() bool {
		if c == nil {
			if c, err = mcpadapter.Dial(ctx, url, lead, "lead"); err != nil {
				c = nil
				return false
			}
			t.Cleanup(func() { c.Close() })
		}
		_, err = c.Members(ctx)
		return err == nil
	}) {
		t.Fatalf("the daemon on NATS does not answer the lead: %v", err)
	}
	sendRightAfterAdd(t, ctx, c, func(name string) {
		if _, err := tokens.Add(name, mcpadapter.RoleMember); err != nil {
			t.Fatal(err)
		}
	})
}

// sendRightAfterAdd sends as lead to twenty members, each right after add
// gave it a member token, and fails the test if any send was refused as
// ERR_UNKNOWN_MEMBER.
func sendRightAfterAdd(t *testing.T, ctx context.Context, lead *mcpadapter.Client, add func(name string)) {
	t.Helper()
	refused := 0
	for i := range 20 {
		name := fmt.Sprintf("late%d", i)
		add(name)
		o, err := lead.SendDetached(ctx, name, "task")
		switch {
		case fleetstate.CodeOf(err) == fleetstate.CodeUnknownMember:
			refused++
		case err != nil:
			t.Fatalf("send to %s: %v", name, err)
		case o.Kind != fleetstate.OutcomePending || o.Ticket == "":
			t.Fatalf("send to %s: %+v; want pending with a ticket", name, o)
		}
	}
	if refused > 0 {
		t.Fatalf("%d of 20 sends right after the member's token was added answered %s; want none", refused, fleetstate.CodeUnknownMember)
	}
}
