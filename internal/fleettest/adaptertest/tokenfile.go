package adaptertest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// TestTokenFile is the contract of a [auth.TokenFile]: open returns
// two handles on one new, empty token file, as two processes have them.
// The suite checks that a missing file loads as nil, that Update passes
// the current bytes to its change and writes what it returns, that a
// failed change writes nothing, that a handle's own change loads at once
// and the other's within a few seconds, and that Tokens on the two
// handles see each other's tokens.
func TestTokenFile(t *testing.T, open func(t *testing.T) (a, b auth.TokenFile)) {
	t.Run("Update", func(t *testing.T) {
		a, b := open(t)
		if data, err := a.Load(); err != nil || data != nil {
			t.Fatalf("Load of a new file: %q, %v; want nil, nil", data, err)
		}
		write := func(f auth.TokenFile, want, data string) {
			t.Helper()
			err := f.Update(func(old []byte) ([]byte, error) {
				if string(old) != want {
					t.Errorf("Update: change got %q; want %q", old, want)
				}
				return []byte(data), nil
			})
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if got, err := f.Load(); err != nil || string(got) != data {
				t.Fatalf("Load after Update: %q, %v; want %q", got, err, data)
			}
		}
		write(a, "", "[]")
		loads(t, b, "[]")
		write(b, "[]", "[ ]")
		loads(t, a, "[ ]")
		boom := errors.New("boom")
		if err := a.Update(func([]byte) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
			t.Fatalf("Update with a failing change: %v; want its error", err)
		}
		loads(t, b, "[ ]")
	})
	t.Run("Tokens", func(t *testing.T) {
		a, b := open(t)
		ta, err := auth.NewTokens(a)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := auth.NewTokens(b)
		if err != nil {
			t.Fatal(err)
		}
		lead, err := ta.Add("lead", mcpadapter.RoleLead)
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := ta.Lookup(lead); !ok || id.Agent != "lead" {
			t.Fatalf("Lookup on the adding Tokens: %v, %v; want lead at once", id, ok)
		}
		seen := func(tk *auth.Tokens, token string, want bool) {
			t.Helper()
			if !fleettest.Until(5*time.Second, 5*time.Millisecond, func() bool { _, ok := tk.Lookup(token); return ok == want }) {
				t.Fatalf("Lookup on the other Tokens: still %v after 5s", !want)
			}
		}
		seen(tb, lead, true)
		if _, err := tb.Add("alice", mcpadapter.RoleMember); err != nil {
			t.Fatal(err)
		}
		if n, err := ta.Revoke("lead"); err != nil || n != 1 {
			t.Fatalf("Revoke: %d, %v; want 1, nil", n, err)
		}
		seen(tb, lead, false)
		if got := tb.Agents(mcpadapter.RoleMember); len(got) != 1 || got[0] != "alice" {
			t.Errorf("members after the revocation: %v; want [alice]", got)
		}
	})
}

// loads waits until f loads data.
func loads(t *testing.T, f auth.TokenFile, data string) {
	t.Helper()
	var got []byte
	var err error
	if !fleettest.Until(5*time.Second, 5*time.Millisecond, func() bool {
		got, err = f.Load()
		return err == nil && bytes.Equal(got, []byte(data))
	}) {
		t.Fatalf("Load: %q, %v after 5s; want %q", got, err, data)
	}
}
