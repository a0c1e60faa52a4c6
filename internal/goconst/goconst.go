// Package goconst reads the string constants a Go package declares, from
// its source, for tests that check a list or a table covers every one.
package goconst

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
)

// Values returns the constants of type typ declared in the non-test Go
// files of dir, by value, with their names. A constant of the type whose
// value is not a string literal is an error.
func Values(dir, typ string) (map[string]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
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
						return nil, fmt.Errorf("goconst: %s is not a literal", n.Name)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						return nil, fmt.Errorf("goconst: %s: %v", n.Name, err)
					}
					out[s] = n.Name
				}
			}
		}
	}
	return out, nil
}
