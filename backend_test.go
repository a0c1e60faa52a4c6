package fleetstate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fleetstate/fleetstate"
)

// ownedFake is a backend whose fleet may have an owner; only Clean and
// FleetOwner work, and Clean counts its calls.
type ownedFake struct {
	fleetstate.Backend // nil: any other call panics
	owner              *fleetstate.Owner
	cleans             int
}

func (b *ownedFake) Clean(context.Context) error { b.cleans++; return nil }

func (b *ownedFake) FleetOwner(context.Context) (fleetstate.Owner, bool, error) {
	if b.owner == nil {
		return fleetstate.Owner{}, false, nil
	}
	return *b.owner, true, nil
}

// TestBackendCleanRefusedWhileOwned: a store on a backend whose fleet has
// an owner refuses Clean, naming the owner, and leaves the backend alone,
// as a store on a state directory owned by a rendezvous does.
func TestBackendCleanRefusedWhileOwned(t *testing.T) {
	b := &ownedFake{owner: &fleetstate.Owner{PID: 42, Addr: "http://127.0.0.1:7333/mcp"}}
	st := fleetstate.OpenBackend(b, nil)
	err := st.Clean()
	var owned *fleetstate.OwnedError
	if !errors.Is(err, fleetstate.ErrFleetOwned) || !errors.As(err, &owned) || owned.Owner.Addr != b.owner.Addr {
		t.Fatalf("Clean of an owned fleet: %v; want ErrFleetOwned naming the owner", err)
	}
	if b.cleans != 0 {
		t.Fatalf("the backend was cleaned %d times; want none", b.cleans)
	}
	if o, ok, err := st.FleetOwner(); err != nil || !ok || o.PID != 42 {
		t.Fatalf("FleetOwner() = %+v, %v, %v; want pid 42", o, ok, err)
	}
	b.owner = nil
	if err := st.Clean(); err != nil || b.cleans != 1 {
		t.Fatalf("Clean without an owner: %v, %d cleans; want nil, 1", err, b.cleans)
	}
	if _, ok, err := st.FleetOwner(); err != nil || ok {
		t.Fatalf("FleetOwner() without one: %v, %v; want none", ok, err)
	}
}

// TestBackendErrorsKeepTheirCode: the store names the operation of a
// backend's error and keeps its code; an error without a code is internal.
func TestBackendErrorsKeepTheirCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want fleetstate.Code
	}{
		{&fleetstate.Error{Code: fleetstate.CodeUnavailable, Err: errors.New("no servers")}, fleetstate.CodeUnavailable},
		{errors.New("plain"), fleetstate.CodeInternal},
	} {
		st := fleetstate.OpenBackend(&failingBackend{err: tc.err}, nil)
		_, err := st.CurrentSession()
		var e *fleetstate.Error
		if fleetstate.CodeOf(err) != tc.want || !errors.As(err, &e) || e.Op != "get session" {
			t.Errorf("CurrentSession with the backend failing %v: %v; want code %s, op %q", tc.err, err, tc.want, "get session")
		}
	}
}

// failingBackend fails every call with err.
type failingBackend struct {
	fleetstate.Backend
	err error
}

func (b *failingBackend) CurrentSession(context.Context) (fleetstate.Session, bool, error) {
	return fleetstate.Session{}, false, b.err
}
