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
