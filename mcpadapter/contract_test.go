package mcpadapter_test

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// readmeTool is one row of the server guide's tool table (docs/server.md).
type readmeTool struct {
	name     string
	args     []string        // the union of the argument names, without "?"
	optional map[string]bool // names marked "?" in some alternative
	plain    map[string]bool // names written without "?" in some alternative
}

var backticked = regexp.MustCompile("`([^`]*)`")

// parseToolTable reads the table under the "Tools" heading of a guide.
func parseToolTable(t *testing.T, path string) []readmeTool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []readmeTool
	inSection, inTable := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			if inSection && inTable {
				break
			}
			inSection = line == "### Tools" || line == "## Tools"
			continue
		}
		if !inSection {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the table ended
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) < 2 {
			t.Fatalf("table row %q has fewer than two cells", line)
		}
		if cells[0] == "tool" || strings.Trim(cells[0], "-: ") == "" {
			continue // header or separator
		}
		name := backticked.FindStringSubmatch(cells[0])
		if name == nil {
			t.Fatalf("table row %q: the tool is not in backticks", line)
		}
		row := readmeTool{name: name[1], optional: map[string]bool{}, plain: map[string]bool{}}
		alts := backticked.FindAllStringSubmatch(cells[1], -1)
		if len(alts) == 0 && cells[1] != "—" && cells[1] != "-" {
			t.Fatalf("table row %q: arguments %q are neither backticked nor —", line, cells[1])
		}
		for _, alt := range alts {
			for _, a := range strings.Split(alt[1], ",") {
				a = strings.TrimSpace(a)
				if a == "" {
					t.Fatalf("table row %q: empty argument name", line)
				}
				opt := strings.HasSuffix(a, "?")
				a = strings.TrimSuffix(a, "?")
				if opt {
					row.optional[a] = true
				} else {
					row.plain[a] = true
				}
				if !slices.Contains(row.args, a) {
					row.args = append(row.args, a)
				}
			}
		}
		sort.Strings(row.args)
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("no tool table under ### Tools in %s", path)
	}
	return rows
}

// TestReadmeToolTable: the server guide's tool table names exactly the tools the
// server registers, each with exactly the arguments of its input schema;
// an argument the schema requires is never marked optional, and one
// marked optional is never required.
func TestReadmeToolTable(t *testing.T) {
	rows := parseToolTable(t, "../docs/server.md")
	e := newEnv(t, envOpts{})

	var documented, registered []string
	for _, r := range rows {
		if slices.Contains(documented, r.name) {
			t.Errorf("the guide documents %s twice", r.name)
		}
		documented = append(documented, r.name)
	}
	for name := range e.Tools {
		registered = append(registered, name)
	}
	sort.Strings(documented)
	sort.Strings(registered)
	if !slices.Equal(documented, registered) {
		t.Errorf("the guide's tools %v; server registers %v", documented, registered)
	}

	for _, r := range rows {
		tl, ok := e.Tools[r.name]
		if !ok {
			continue
		}
		in, _ := tl["inputSchema"].(map[string]any)
		props, _ := in["properties"].(map[string]any)
		var args []string
		for p := range props {
			args = append(args, p)
		}
		sort.Strings(args)
		if !slices.Equal(r.args, args) {
			t.Errorf("%s: README arguments %v; input schema %v", r.name, r.args, args)
		}
		required := map[string]bool{}
		if req, ok := in["required"].([]any); ok {
			for _, x := range req {
				required[x.(string)] = true
			}
		}
		for a := range r.optional {
			if required[a] {
				t.Errorf("%s: README marks %s optional; the schema requires it", r.name, a)
			}
		}
		for a := range required {
			if !r.plain[a] || r.optional[a] {
				t.Errorf("%s: the schema requires %s; README does not show it as required", r.name, a)
			}
		}
	}
}

// TestParseToolTable checks the parser itself on the forms the table uses.
func TestParseToolTable(t *testing.T) {
	readme := "# x\n\n### Tools\n\n" +
		"| tool | arguments | result | who |\n" +
		"| --- | --- | --- | --- |\n" +
		"| `a` | — | `{id}` | anyone |\n" +
		"| `fleet_send` | `to, content, wait?` or `turn_id, content` | an outcome | lead |\n" +
		"| `list` | `session_id?, agent_name?` | x | y |\n" +
		"\nAfter the table | `not_a_tool` | x |\n\n## Next\n| `other` | `z` |\n"
	path := t.TempDir() + "/README.md"
	if err := os.WriteFile(path, []byte(readme), 0o600); err != nil {
		t.Fatal(err)
	}
	rows := parseToolTable(t, path)
	if len(rows) != 3 {
		t.Fatalf("%d rows; want 3: %+v", len(rows), rows)
	}
	if rows[0].name != "a" || len(rows[0].args) != 0 {
		t.Errorf("row a: %+v", rows[0])
	}
	if got, want := rows[1].args, []string{"content", "to", "turn_id", "wait"}; !slices.Equal(got, want) {
		t.Errorf("fleet_send args %v; want %v", got, want)
	}
	if !rows[1].optional["wait"] || rows[1].optional["content"] || !rows[1].plain["to"] {
		t.Errorf("fleet_send optional %v plain %v", rows[1].optional, rows[1].plain)
	}
	if got, want := rows[2].args, []string{"agent_name", "session_id"}; !slices.Equal(got, want) {
		t.Errorf("list args %v; want %v", got, want)
	}
}
