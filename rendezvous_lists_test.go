package fleetstate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate"
)

// declared returns the values of the constants of type typ the package
// declares, read from its source, so that a new constant cannot miss its
// list.
func declared(t *testing.T, typ string) []string {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); !ok || id.Name != typ {
					continue
				}
				for i, n := range v.Names {
					lit, ok := v.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s is not a literal", n.Name)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, s)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no constant of type %s found", typ)
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
