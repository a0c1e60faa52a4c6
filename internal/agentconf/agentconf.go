// Package agentconf writes what an agent of a fleet runs with, for
// fleetstate up: its environment file, the pane launcher that sources it,
// and the MCP configuration of its program (Claude Code, Codex).
//
// It is internal: the fleetstate command is its only user.
//
// The plain text of an agent's token lives in one place: the agent's
// environment file, .fleetstate/agents/NAME/env in the state directory's
// private folder (owner-only), which the pane's launcher sources before it
// runs the command. The configuration written into a workdir refers to
// the token by the name of its variable, never by its value, so that a
// workdir (often a git repository, often shared by several agents) holds
// no secret, and one .mcp.json serves every agent that starts there.
//
// Every file is merged, never clobbered: fleetstate up sets its own entries
// and keeps everything else, and writes nothing when the file already holds
// what it would write, so a second run changes no file.
package agentconf

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
)

// hookMarker ends the hook commands fleetstate up writes, so that a later
// run finds and updates them (the binary may have moved) instead of
// adding more.
const hookMarker = "# fleetstate up"

// envNameRE matches the name of an environment variable.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// statusHookEvents are the hook events, the same in Claude Code and
// Codex, whose status the daemon hears of (see agent.StatusOfHook);
// Claude Code adds Notification, which says when it waits on a prompt of
// its own. PermissionRequest is not among them: the agents run the hooks
// of one event at once, so a status hook there could report BLOCKED after
// the permission hook's report of WORKING that follows a decision, and
// leave a working agent BLOCKED. The permission hook reports both.
var statusHookEvents = []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"}

// statusHookTimeout is the seconds after which the agent stops a status
// hook: the report is one bounded HTTP call.
const statusHookTimeout = 15

// WriteIfChanged writes data to path (owner-only when private) unless the
// file holds it already, atomically; it reports whether it wrote.
func WriteIfChanged(path string, data []byte, private bool) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	dirPerm, perm := os.FileMode(0o755), os.FileMode(0o644)
	if private {
		dirPerm, perm = 0o700, 0o600
	}
	if err := os.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return false, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return false, err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return false, err
	}
	return true, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// EnvFile renders an agent's environment file: one export a line, sorted,
// for the Launcher to source.
func EnvFile(env map[string]string) []byte {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString("# Written by fleetstate up: the environment of this agent's pane. It holds\n# the agent's token: keep it private.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(env[k]))
	}
	return b.Bytes()
}

// ReadEnvFile reads back the variables of an environment file written by
// EnvFile; a missing or foreign file reads as empty, and a line it cannot
// read is skipped. Each value is read through its quotes as the shell
// reads it, so a value that spans lines (a newline in the fleet file's
// env) reads back whole, and none of its lines is taken for a variable
// of its own (such as a FLEET_TOKEN that is not the agent's).
func ReadEnvFile(path string) map[string]string {
	out := map[string]string{}
	data, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for s := string(data); s != ""; {
		if k, v, rest, ok := readExport(s); ok {
			out[k], s = v, rest
			continue
		}
		_, s, _ = strings.Cut(s, "\n") // a comment, or a line EnvFile does not write
	}
	return out
}

// readExport reads one line of EnvFile's at the start of s: export, the
// name, "=" and the value quoted by shellQuote, which may span lines. It
// returns the name, the value and what follows the line.
func readExport(s string) (name, value, rest string, ok bool) {
	s, ok = strings.CutPrefix(s, "export ")
	if !ok {
		return "", "", "", false
	}
	name, s, ok = strings.Cut(s, "=")
	if !ok || !envNameRE.MatchString(name) || !strings.HasPrefix(s, "'") {
		return "", "", "", false
	}
	var b strings.Builder
	for {
		switch {
		case strings.HasPrefix(s, "'"):
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return "", "", "", false // an unterminated quote
			}
			b.WriteString(s[1 : 1+end])
			s = s[2+end:]
		case strings.HasPrefix(s, `\'`):
			b.WriteByte('\'')
			s = s[2:]
		case s == "" || s[0] == '\n':
			return name, b.String(), strings.TrimPrefix(s, "\n"), true
		default:
			return "", "", "", false
		}
	}
}

// Launcher returns the argv of an agent's pane: a shell that sources the
// environment file and then becomes the agent's command, so that the
// token never appears in an argument list (which other users may read).
func Launcher(envPath string, command []string) []string {
	return append([]string{"/bin/sh", "-c", `. "$1" && shift && exec "$@"`, "fleetstate-agent", envPath}, command...)
}

// readJSONObject reads the JSON object in path; a missing or empty file
// is an empty object.
func readJSONObject(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) || (err == nil && len(bytes.TrimSpace(data)) == 0) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%s is not a JSON object (%v): fix it or move it away, and run fleetstate up again", path, err)
	}
	return obj, nil
}

func writeJSONObject(path string, obj map[string]any) (bool, error) {
	return writeJSONFile(path, obj, false)
}

// writeJSONFile writes obj into path as indented JSON unless the file
// holds it already (owner-only when private), and reports whether it
// wrote.
func writeJSONFile(path string, obj map[string]any, private bool) (bool, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(obj); err != nil {
		return false, err
	}
	return WriteIfChanged(path, b.Bytes(), private)
}

// object returns obj[key] as an object, making it if it is missing; a key
// that holds something else is an error naming it.
func object(obj map[string]any, path, key string) (map[string]any, error) {
	switch v := obj[key].(type) {
	case nil:
		m := map[string]any{}
		obj[key] = m
		return m, nil
	case map[string]any:
		return v, nil
	}
	return nil, fmt.Errorf("%s: %q is not an object: fix it, and run fleetstate up again", path, key)
}

// addString appends s to the list obj[key] unless it is there.
func addString(obj map[string]any, path, key, s string) error {
	list, ok := obj[key].([]any)
	if obj[key] != nil && !ok {
		return fmt.Errorf("%s: %q is not a list: fix it, and run fleetstate up again", path, key)
	}
	for _, v := range list {
		if v == s {
			return nil
		}
	}
	obj[key] = append(list, s)
	return nil
}

// WriteClaudeConfig merges the fleetstate MCP server into workdir's
// .mcp.json and the status hooks, the permission request hook, the
// server's approval and its tools' permission into workdir's
// .claude/settings.json. It returns the files
// it changed.
func WriteClaudeConfig(workdir string, c Config) ([]string, error) {
	bin := c.Bin
	var changed []string
	mcpPath := filepath.Join(workdir, ".mcp.json")
	obj, err := readJSONObject(mcpPath)
	if err != nil {
		return nil, err
	}
	servers, err := object(obj, mcpPath, "mcpServers")
	if err != nil {
		return nil, err
	}
	// A stdio proxy rather than an HTTP entry: Claude Code expands
	// variables in args and env reliably, and the proxy holds the
	// listening stream by which the daemon knows the agent is there.
	servers["fleetstate"] = map[string]any{
		"type":    "stdio",
		"command": bin,
		"args":    []any{"mcp", "--connect", "${FLEET_URL}"},
		"env":     map[string]any{"FLEET_TOKEN": "${FLEET_TOKEN}"},
	}
	if w, err := writeJSONObject(mcpPath, obj); err != nil {
		return nil, err
	} else if w {
		changed = append(changed, mcpPath)
	}

	setPath := filepath.Join(workdir, ".claude", "settings.json")
	set, err := readJSONObject(setPath)
	if err != nil {
		return nil, err
	}
	if err := addString(set, setPath, "enabledMcpjsonServers", "fleetstate"); err != nil {
		return nil, err
	}
	perms, err := object(set, setPath, "permissions")
	if err != nil {
		return nil, err
	}
	if err := addString(perms, setPath, "allow", "mcp__fleetstate"); err != nil {
		return nil, err
	}
	// Claude Code's own default mode, "auto", decides permission prompts
	// without calling the PermissionRequest hook: the fleet would never
	// hear of them. A mode the user chose otherwise is kept.
	if mode, _ := perms["defaultMode"].(string); mode == "" || mode == "auto" {
		perms["defaultMode"] = "default"
	}
	if _, err := setFleetHooks(set, setPath, c, "Notification"); err != nil {
		return nil, err
	}
	if w, err := writeJSONObject(setPath, set); err != nil {
		return nil, err
	} else if w {
		changed = append(changed, setPath)
	}
	return changed, nil
}

// DefaultPermissionWait is how long the PermissionRequest hook fleetstate
// up writes waits for a decision unless the fleet file says otherwise;
// the agent is told to stop the hook 15 s after that (Claude Code's
// default is 60 s).
const DefaultPermissionWait = 2 * time.Minute

// permissionHook is the PermissionRequest hook's command; outside a
// fleet it prints nothing, and the agent asks as usual.
func permissionHook(bin string, wait time.Duration) string {
	return `test -z "$FLEET_TOKEN" || ` + shellQuote(bin) + " hook permission --timeout " + wait.String() + " " + hookMarker
}

// Config is what the configuration of one agent's program refers to.
type Config struct {
	Bin string // the fleetstate binary the MCP proxy and the hooks run
	URL string // the daemon's MCP endpoint (Codex's config names it; Claude Code's reads $FLEET_URL)
	// Trust is the folder whose trust, and that of the hooks written,
	// is recorded, as the CLI records a person's answers to its
	// first-run questions (Codex; see TrustClaude for Claude Code); ""
	// records none.
	Trust string
	// PermissionWait bounds the wait of the PermissionRequest hook for a
	// decision; zero means DefaultPermissionWait.
	PermissionWait time.Duration
}

// hookSpec is one hook command fleetstate up writes: where it sits in
// the hooks of its event (the matcher group and the handler in it), for
// Codex's record of the hooks it trusts.
type hookSpec struct {
	event          string
	command        string
	timeout        int
	group, handler int
}

// setFleetHooks writes the hooks of a fleet's agent into obj["hooks"],
// the hooks object of Claude Code's settings and of Codex's hooks.json,
// which share a shape: the status hooks on statusHookEvents and extra,
// and the PermissionRequest hook that raises the agent's permission
// prompts in the fleet. Outside a fleet (no token in the environment)
// every one of them does nothing. It returns the hooks it wrote.
func setFleetHooks(obj map[string]any, path string, c Config, extra ...string) ([]hookSpec, error) {
	hooks, err := object(obj, path, "hooks")
	if err != nil {
		return nil, err
	}
	status := `test -z "$FLEET_TOKEN" || ` + shellQuote(c.Bin) + " status " + hookMarker
	var specs []hookSpec
	for _, ev := range append(slices.Clone(statusHookEvents), extra...) {
		specs = append(specs, hookSpec{event: ev, command: status, timeout: statusHookTimeout})
	}
	// The agent stops a hook after 60 s (Claude Code) or 600 s (Codex)
	// unless told; this one waits up to its own bound. A status hook an
	// earlier up wrote beside it goes (see statusHookEvents).
	wait := cmp.Or(c.PermissionWait, DefaultPermissionWait)
	specs = append(specs, hookSpec{event: "PermissionRequest", command: permissionHook(c.Bin, wait), timeout: int(wait/time.Second) + 15})
	dropStatusHook(hooks, "PermissionRequest")
	for i := range specs {
		if err := setHook(hooks, path, &specs[i]); err != nil {
			return nil, err
		}
	}
	return specs, nil
}

// isPermissionHook tells the permission hook's command from the status
// hook's.
func isPermissionHook(command string) bool { return strings.Contains(command, " hook permission ") }

// dropStatusHook removes the status hook fleetstate up wrote on event, and
// a matcher group it leaves empty; the user's hooks stay.
func dropStatusHook(hooks map[string]any, event string) {
	groups, _ := hooks[event].([]any)
	var kept []any
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		list, ok := gm["hooks"].([]any)
		if !ok {
			kept = append(kept, g)
			continue
		}
		var left []any
		for _, x := range list {
			hm, _ := x.(map[string]any)
			if c, _ := hm["command"].(string); !strings.HasSuffix(c, hookMarker) || isPermissionHook(c) {
				left = append(left, x)
			}
		}
		if len(left) > 0 {
			gm["hooks"] = left
			kept = append(kept, g)
		}
	}
	if groups != nil {
		hooks[event] = kept
	}
}

// setHook makes the hook h run on its event: it updates the command
// fleetstate up wrote before for that event and kind (the status, or the
// permission request), or adds a matcher group with it, and records
// where it sits.
func setHook(hooks map[string]any, path string, h *hookSpec) error {
	groups, ok := hooks[h.event].([]any)
	if hooks[h.event] != nil && !ok {
		return fmt.Errorf("%s: hooks.%s is not a list: fix it, and run fleetstate up again", path, h.event)
	}
	kind := isPermissionHook
	for gi, g := range groups {
		gm, _ := g.(map[string]any)
		list, _ := gm["hooks"].([]any)
		for hi, x := range list {
			hm, _ := x.(map[string]any)
			if c, _ := hm["command"].(string); strings.HasSuffix(c, hookMarker) && kind(c) == kind(h.command) {
				hm["type"], hm["command"], hm["timeout"] = "command", h.command, h.timeout
				h.group, h.handler = gi, hi
				return nil
			}
		}
	}
	h.group, h.handler = len(groups), 0
	hooks[h.event] = append(groups, map[string]any{"hooks": []any{
		map[string]any{"type": "command", "command": h.command, "timeout": h.timeout}}})
	return nil
}

// codexBlock is the [mcp_servers.fleetstate] table of a Codex agent: the
// stdio proxy, with the agent's variables let through (Codex passes an MCP
// server only a short list of variables unless told).
func codexBlock(bin, url string) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) } // a TOML basic string
	return "[mcp_servers.fleetstate]\n" +
		"command = " + q(bin) + "\n" +
		"args = [\"mcp\", \"--connect\", " + q(url) + "]\n" +
		"env_vars = [\"FLEET_TOKEN\", \"FLEET_AGENT\", \"FLEET_ROLE\", \"FLEET_URL\"]\n"
}

// WriteCodexConfig writes the fleetstate MCP server into config.toml of
// home, the CODEX_HOME of one agent, and the fleet's hooks (status and
// permission requests) into its hooks.json. A new home starts from the
// user's own configuration (~/.codex or $CODEX_HOME) and links its
// login, so the agent runs as the user's Codex does.
//
// With trust, the folder the agent works in (a project root, see
// [ProjectRoot]) and the hooks written here are recorded as trusted, as
// Codex records the answers to its first-run questions: "Trust this
// folder?" and "Hooks need review". Without it, Codex asks them in the
// agent's pane.
func WriteCodexConfig(home string, c Config) ([]string, error) {
	bin, url, trust := c.Bin, c.URL, c.Trust
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(home, "config.toml")
	old, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		userHome := os.Getenv("CODEX_HOME")
		if userHome == "" {
			if h, err := os.UserHomeDir(); err == nil {
				userHome = filepath.Join(h, ".codex")
			}
		}
		if userHome != "" && userHome != home {
			old, _ = os.ReadFile(filepath.Join(userHome, "config.toml"))
			auth := filepath.Join(userHome, "auth.json")
			if _, err := os.Stat(auth); err == nil {
				_ = os.Symlink(auth, filepath.Join(home, "auth.json")) // best effort: without it, the agent asks for a login
			}
		}
	} else if err != nil {
		return nil, err
	}
	// The hooks, in the hooks.json of the agent's own CODEX_HOME (the
	// user's layer), in the shape Claude Code's settings have.
	hooksPath := filepath.Join(home, "hooks.json")
	obj, err := readJSONObject(hooksPath)
	if err != nil {
		return nil, err
	}
	specs, err := setFleetHooks(obj, hooksPath, c)
	if err != nil {
		return nil, err
	}
	text := replaceTOMLTable(string(old), "mcp_servers.fleetstate", codexBlock(bin, url))
	if trust != "" {
		text = replaceTOMLTable(text, "projects."+tomlString(trust), "[projects."+tomlString(trust)+"]\ntrust_level = \"trusted\"\n")
		for _, h := range specs {
			key := "hooks.state." + tomlString(codexHookKey(hooksPath, h))
			text = replaceTOMLTable(text, key, "["+key+"]\ntrusted_hash = "+tomlString(codexHookHash(h))+"\n")
		}
	}
	var changed []string
	if w, err := WriteIfChanged(path, []byte(text), true); err != nil {
		return nil, err
	} else if w {
		changed = append(changed, path)
	}
	if w, err := writeJSONObject(hooksPath, obj); err != nil {
		return nil, err
	} else if w {
		changed = append(changed, hooksPath)
	}
	return changed, nil
}

// tomlString returns s as a TOML basic string.
func tomlString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// codexHookKey is the name under which Codex records its trust of the
// hook h of the hooks.json at path: the file, the event in snake case,
// and where the hook sits.
func codexHookKey(path string, h hookSpec) string {
	return fmt.Sprintf("%s:%s:%d:%d", path, snakeCase(h.event), h.group, h.handler)
}

// codexHookHash is the hash Codex records for a hook it trusts: SHA-256
// of the hook's identity (its event, and the handler as Codex reads it,
// defaults filled in) as JSON with sorted keys and no spaces. A hook
// whose hash differs from the one recorded is one Codex asks about again.
func codexHookHash(h hookSpec) string {
	identity := map[string]any{
		"event_name": snakeCase(h.event),
		"hooks": []any{map[string]any{
			"type": "command", "command": h.command, "timeout": h.timeout, "async": false,
		}},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // map keys sorted, as Codex sorts them
	enc.SetEscapeHTML(false)
	_ = enc.Encode(identity)
	sum := sha256.Sum256(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// snakeCase spells a hook event as Codex's keys do: PreToolUse is
// pre_tool_use.
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// replaceTOMLTable replaces the table [name] of a TOML text (its header
// up to the next table header) with block, or appends block.
func replaceTOMLTable(text, name, block string) string {
	lines := strings.SplitAfter(text, "\n")
	start, end := -1, len(lines)
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if start < 0 && t == "["+name+"]" {
			start = i
			continue
		}
		if start >= 0 && strings.HasPrefix(t, "[") && !strings.HasPrefix(t, "["+name+".") {
			end = i
			break
		}
	}
	if start < 0 {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if text != "" {
			text += "\n"
		}
		return text + block
	}
	rest := strings.Join(lines[end:], "")
	if rest != "" {
		block += "\n"
	}
	return strings.Join(lines[:start], "") + block + rest
}
