package agentconf

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestReplaceTOMLTable(t *testing.T) {
	block := "[mcp_servers.fleetstate]\ncommand = \"f\"\n"
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", block},
		{"appended", "model = \"o3\"", "model = \"o3\"\n\n" + block},
		{"replaced, the rest kept", "model = \"o3\"\n\n[mcp_servers.fleetstate]\ncommand = \"old\"\n[mcp_servers.fleetstate.env]\nX = \"1\"\n\n[mcp_servers.other]\ncommand = \"o\"\n",
			"model = \"o3\"\n\n" + block + "\n[mcp_servers.other]\ncommand = \"o\"\n"},
		{"replaced at the end", "[mcp_servers.fleetstate]\ncommand = \"old\"\n", block},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := replaceTOMLTable(c.in, "mcp_servers.fleetstate", block)
			if got != c.want {
				t.Errorf("got\n%q\nwant\n%q", got, c.want)
			}
			if again := replaceTOMLTable(got, "mcp_servers.fleetstate", block); again != got {
				t.Errorf("a second run changed it:\n%q", again)
			}
		})
	}
}

// TestCodexConfig: a new CODEX_HOME starts from the user's own
// configuration, gets the fleetstate server, and is not rewritten when
// nothing changed.
func TestCodexConfig(t *testing.T) {
	user := t.TempDir()
	if err := os.WriteFile(filepath.Join(user, "config.toml"), []byte("model = \"o3\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(user, "auth.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CODEX_HOME", user)
	home := filepath.Join(t.TempDir(), "codex")
	files, err := WriteCodexConfig(home, Config{Bin: "/bin/fleetstate", URL: "http://127.0.0.1:9/mcp"})
	if err != nil || len(files) != 2 {
		t.Fatalf("WriteCodexConfig: %v, %v; want config.toml and hooks.json", files, err)
	}
	hooks, _ := os.ReadFile(filepath.Join(home, "hooks.json"))
	if !strings.Contains(string(hooks), `"PermissionRequest"`) || !strings.Contains(string(hooks), `hook permission --timeout 2m0s # fleetstate up`) {
		t.Errorf("hooks.json lacks the permission request hook:\n%s", hooks)
	}
	data, _ := os.ReadFile(filepath.Join(home, "config.toml"))
	for _, want := range []string{`model = "o3"`, `[mcp_servers.fleetstate]`, `args = ["mcp", "--connect", "http://127.0.0.1:9/mcp"]`, `env_vars = ["FLEET_TOKEN"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("config.toml lacks %q:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), "fst_") {
		t.Errorf("a token in config.toml:\n%s", data)
	}
	if _, err := os.Lstat(filepath.Join(home, "auth.json")); err != nil {
		t.Errorf("the user's login is not linked: %v", err)
	}
	if files, err := WriteCodexConfig(home, Config{Bin: "/bin/fleetstate", URL: "http://127.0.0.1:9/mcp"}); err != nil || len(files) != 0 {
		t.Errorf("second write: %v, %v; want nothing written", files, err)
	}
}

// TestClaudeConfigRefusesForeignShapes: a settings file whose hooks are
// not what Claude Code reads is named, not overwritten.
func TestClaudeConfigRefusesForeignShapes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := []byte(`{"hooks": "none"}`)
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteClaudeConfig(dir, Config{Bin: "/bin/fleetstate"}); err == nil || !strings.Contains(err.Error(), "settings.json") {
		t.Errorf("WriteClaudeConfig: %v; want an error naming settings.json", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, ".claude", "settings.json")); string(got) != string(bad) {
		t.Errorf("settings.json was changed to %s", got)
	}
}

// TestEnvFileRoundTrip: every value EnvFile writes reads back whole, as
// the shell that sources the file reads it, however many lines it spans
// and whatever its lines look like; none of its lines is read as a
// variable of its own.
func TestEnvFileRoundTrip(t *testing.T) {
	env := map[string]string{
		"FLEET_TOKEN": "fst_the-real-one",
		"A_FIRST":     "one\ntwo",
		"SETUP":       "cd src\nFLEET_TOKEN='not-the-token'",
		"SHELLISH":    "\nexport OTHER='x'\n",
		"QUOTES":      "it's\n'quoted'\n''",
		"EMPTY":       "",
		"TRAILING":    "line\n",
		"BACKSLASH":   `a\'b\`,
	}
	path := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(path, EnvFile(env), 0o600); err != nil {
		t.Fatal(err)
	}
	got := ReadEnvFile(path)
	if len(got) != len(env) {
		t.Errorf("read %d variables %q; want %d", len(got), got, len(env))
	}
	for k, want := range env {
		if got[k] != want {
			t.Errorf("%s read back as %q; want %q", k, got[k], want)
		}
	}
	// The shell reads the same values.
	for k, want := range env {
		out, err := exec.Command("/bin/sh", "-c", `. "$1" && printf %s "$(printenv "$2"; echo .)"`, "sh", path, k).Output()
		if err != nil {
			t.Fatal(err)
		}
		if sh := strings.TrimSuffix(strings.TrimSuffix(string(out), "."), "\n"); sh != want {
			t.Errorf("the shell reads %s as %q; want %q", k, sh, want)
		}
	}
}

// TestClaudePermissionHook: the PermissionRequest hook runs fleetstate
// hook permission, with a timeout beyond its own wait, and a second run
// updates it rather than adding another. No status hook runs beside it
// (the agent would run both at once, and the status hook's BLOCKED could
// land after the permission hook's WORKING): one an earlier up wrote
// goes, and a hook of the user's stays.
func TestClaudePermissionHook(t *testing.T) {
	dir := t.TempDir()
	want := `test -z "$FLEET_TOKEN" || '/bin/fleetstate' hook permission --timeout 2m0s # fleetstate up`
	status := `test -z "$FLEET_TOKEN" || '/bin/fleetstate' status # fleetstate up`
	mine := `notify-send asked`
	old := `{"hooks":{"PermissionRequest":[{"hooks":[{"type":"command","command":` + strconv.Quote(status) + `,"timeout":15}]},{"hooks":[{"type":"command","command":` + strconv.Quote(mine) + `}]}]}}`
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := WriteClaudeConfig(dir, Config{Bin: "/bin/fleetstate"}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Command string `json:"command"`
				Timeout int    `json:"timeout"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	var perm, user int
	for _, g := range set.Hooks["PermissionRequest"] {
		for _, h := range g.Hooks {
			switch h.Command {
			case want:
				perm++
				if h.Timeout <= 120 {
					t.Errorf("hook %+v; want a timeout over 120 s", h)
				}
			case mine:
				user++
			default:
				t.Errorf("a PermissionRequest hook neither up nor the user wrote: %+v", h)
			}
		}
	}
	if perm != 1 || user != 1 || len(set.Hooks["PermissionRequest"]) != 2 {
		t.Fatalf("PermissionRequest hooks: %d permission and %d of the user's in %d groups; want one of each in two:\n%s", perm, user, len(set.Hooks["PermissionRequest"]), data)
	}
	if len(set.Hooks["PreToolUse"]) != 1 || set.Hooks["PreToolUse"][0].Hooks[0].Command != status {
		t.Errorf("PreToolUse hooks %+v; want the status hook", set.Hooks["PreToolUse"])
	}
}

// TestClaudePermissionMode: up leaves Claude Code's "auto" mode, in which
// the PermissionRequest hook is never called, for "default"; a mode the
// user chose otherwise stays.
func TestClaudePermissionMode(t *testing.T) {
	for _, c := range []struct{ have, want string }{
		{"", "default"}, {`"auto"`, "default"}, {`"acceptEdits"`, "acceptEdits"}, {`"default"`, "default"},
	} {
		dir := t.TempDir()
		if c.have != "" {
			if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), []byte(`{"permissions":{"defaultMode":`+c.have+`}}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := WriteClaudeConfig(dir, Config{Bin: "/bin/fleetstate"}); err != nil {
			t.Fatal(err)
		}
		var set struct {
			Permissions struct {
				DefaultMode string `json:"defaultMode"`
			} `json:"permissions"`
		}
		data, _ := os.ReadFile(filepath.Join(dir, ".claude", "settings.json"))
		if err := json.Unmarshal(data, &set); err != nil {
			t.Fatal(err)
		}
		if set.Permissions.DefaultMode != c.want {
			t.Errorf("defaultMode %s: now %q; want %q", c.have, set.Permissions.DefaultMode, c.want)
		}
	}
}

// TestCodexHookHash: the hash up records for a hook is the one Codex
// 0.169.0 itself recorded when a person chose "Trust all and continue"
// for these hooks (measured; a hook without a timeout reads as 600 s).
func TestCodexHookHash(t *testing.T) {
	for _, c := range []struct {
		h    hookSpec
		want string
	}{
		{hookSpec{event: "Stop", command: "fleetstate status # fleetstate up", timeout: 15},
			"sha256:7d8ce46368cad9a64d0d3ec85df4cd3464a7e0399263329c4a2b7b8a4bb14b5a"},
		{hookSpec{event: "PermissionRequest", command: "true", timeout: 600},
			"sha256:84bfab601cd796832edd357e1b1cff50587dfa272fa1464175bc664008d5de00"},
		{hookSpec{event: "PermissionRequest", command: "fleetstate hook permission --timeout 2m0s # fleetstate up", timeout: 135, group: 1},
			"sha256:a05e64b354e5e6411bec7c6e6c04f8a51176154c24183ccc03f7e9b63530f47b"},
	} {
		if got := codexHookHash(c.h); got != c.want {
			t.Errorf("hash of %+v: %s; want %s", c.h, got, c.want)
		}
	}
	if got := codexHookKey("/h/hooks.json", hookSpec{event: "PermissionRequest", group: 1}); got != "/h/hooks.json:permission_request:1:0" {
		t.Errorf("key %s; want /h/hooks.json:permission_request:1:0", got)
	}
}

// TestCodexTrust: with trust, the agent's CODEX_HOME records the project
// root as trusted and every hook up wrote with its hash; without it,
// neither.
func TestCodexTrust(t *testing.T) {
	t.Setenv("CODEX_HOME", t.TempDir())
	home := filepath.Join(t.TempDir(), "codex")
	if _, err := WriteCodexConfig(home, Config{Bin: "/bin/fleetstate", URL: "http://127.0.0.1:9/mcp"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(home, "config.toml"))
	if strings.Contains(string(data), "trust") {
		t.Errorf("trust recorded without consent:\n%s", data)
	}
	for range 2 {
		if _, err := WriteCodexConfig(home, Config{Bin: "/bin/fleetstate", URL: "http://127.0.0.1:9/mcp", Trust: "/src/proj"}); err != nil {
			t.Fatal(err)
		}
	}
	data, _ = os.ReadFile(filepath.Join(home, "config.toml"))
	text := string(data)
	if !strings.Contains(text, "[projects.\"/src/proj\"]\ntrust_level = \"trusted\"\n") {
		t.Errorf("the project is not trusted:\n%s", text)
	}
	hooksPath := filepath.Join(home, "hooks.json")
	var hooks struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Command string `json:"command"`
				Timeout int    `json:"timeout"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	raw, _ := os.ReadFile(hooksPath)
	if err := json.Unmarshal(raw, &hooks); err != nil {
		t.Fatal(err)
	}
	n := 0
	for ev, groups := range hooks.Hooks {
		for gi, g := range groups {
			for hi, h := range g.Hooks {
				n++
				spec := hookSpec{event: ev, command: h.Command, timeout: h.Timeout, group: gi, handler: hi}
				want := "[hooks.state." + tomlString(codexHookKey(hooksPath, spec)) + "]\ntrusted_hash = " + tomlString(codexHookHash(spec)) + "\n"
				if strings.Count(text, want) != 1 {
					t.Errorf("the hook %s of %s is not trusted once:\n%s", h.Command, ev, text)
				}
			}
		}
	}
	if n != len(statusHookEvents)+1 {
		t.Errorf("%d hooks in hooks.json; want the status hooks and the permission hook", n)
	}
}
