package fleetstate_test

import (
	"slices"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/goconst"
)

// declared returns the values of the constants of type typ the package
// declares, read from its source, so that a new constant cannot miss its
// list.
func declared(t *testing.T, typ string) []string {
	t.Helper()
	values, err := goconst.Values(".", typ)
	if err != nil {
		t.Fatal(err)
	}
	if len(values) == 0 {
		t.Fatalf("no constant of type %s found", typ)
	}
	out := make([]string, 0, len(values))
	for v := range values {
		out = append(out, v)
	}
	return out
}

// TestListsHoldEveryConstant: OutcomeKinds, Reasons and TicketStates list
// every constant of their type once, in fresh slices.
func TestListsHoldEveryConstant(t *testing.T) {
	tests := []struct {
		typ  string
		list func() []string
	}{
		{"OutcomeKind", func() []string { return strs(fleetstate.OutcomeKinds()) }},
		{"Reason", func() []string { return strs(fleetstate.Reasons()) }},
		{"TicketState", func() []string { return strs(fleetstate.TicketStates()) }},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			want := declared(t, tc.typ)
			got := tc.list()
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("list %v; want every declared %s once: %v", got, tc.typ, want)
			}
		})
	}
	r := fleetstate.Reasons()
	r[0] = "changed"
	if fleetstate.Reasons()[0] == "changed" {
		t.Error("Reasons returned a shared slice")
	}
}

func strs[S ~string](in []S) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = string(s)
	}
	return out
}
