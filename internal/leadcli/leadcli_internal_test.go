package leadcli

import (
	"strings"
	"testing"
)

func TestMCPURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:7333":       "http://127.0.0.1:7333/mcp",
		"http://127.0.0.1:7333/":      "http://127.0.0.1:7333/mcp",
		"http://127.0.0.1:7333/mcp":   "http://127.0.0.1:7333/mcp",
		"http://127.0.0.1:7333/mcp/":  "http://127.0.0.1:7333/mcp",
		" https://fleet.example/mcp ": "https://fleet.example/mcp",
	} {
		if got, err := mcpURL(in); err != nil || got != want {
			t.Errorf("mcpURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "127.0.0.1:7333", "ftp://x", "http://", "http:///"} {
		if got, err := mcpURL(in); err == nil {
			t.Errorf("mcpURL(%q) = %q; want an error", in, got)
		}
	}
}

func TestReadText(t *testing.T) {
	r := &runner{stdin: strings.NewReader("from stdin\n")}
	text := "-"
	if err := r.readText(&text); err != nil || text != "from stdin\n" {
		t.Errorf("readText(-) = %q, %v; want standard input", text, err)
	}
	r = &runner{stdin: strings.NewReader(strings.Repeat("x", maxText+1))}
	text = "-"
	if err := r.readText(&text); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("readText of a text over the limit: %v; want an error", err)
	}
	for _, empty := range []string{"", " \n\t"} {
		text = empty
		if err := r.readText(&text); err == nil || err.Error() != "the text is empty" {
			t.Errorf("readText(%q): %v; want the text is empty", empty, err)
		}
	}
}

func TestMatchID(t *testing.T) {
	ids := []string{
		"ticket-0a1b2c3d-0000-4000-8000-000000000001",
		"ticket-0a1b9999-0000-4000-8000-000000000002",
		"ticket-77aa0000-0000-4000-8000-000000000003",
	}
	for _, c := range []struct{ name, arg, want, err string }{
		{"the short form watch shows", "0a1b2c3d", ids[0], ""},
		{"a start with its prefix", "ticket-77aa", ids[2], ""},
		{"upper case", "77AA0000", ids[2], ""},
		{"a whole ID", ids[1], ids[1], ""},
		{"unknown: for the daemon to refuse", "ffff0000", "ffff0000", ""},
		{"ambiguous", "0a1b", "", `"0a1b" starts 2 tickets (` + ids[0] + ", " + ids[1] + "): give more of the ID"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := matchID(idTicket, c.arg, ids)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("matchID(%q) = %q, %v; want the error %q", c.arg, got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("matchID(%q) = %q, %v; want %q", c.arg, got, err, c.want)
			}
		})
	}
}
