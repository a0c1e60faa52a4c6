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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// hookMarker ends the hook commands fleetstate up writes, so that a later
// run finds and updates them (the binary may have moved) instead of
// adding more.
const hookMarker = "# fleetstate up"

// envNameRE matches the name of an environment variable.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// claudeHookEvents are the Claude Code hook events whose status the
// daemon hears of (see agent.StatusOfHook).
var claudeHookEvents = []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "Notification"}

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
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(obj); err != nil {
		return false, err
	}
	return WriteIfChanged(path, b.Bytes(), false)
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
func WriteClaudeConfig(workdir, bin string) ([]string, error) {
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
	hooks, err := object(set, setPath, "hooks")
	if err != nil {
		return nil, err
	}
	// Outside a fleet (no token in the environment) the hook does nothing.
	cmd := `test -z "$FLEET_TOKEN" || ` + shellQuote(bin) + " status " + hookMarker
	for _, ev := range claudeHookEvents {
		if err := setHook(hooks, setPath, ev, cmd, 0); err != nil {
			return nil, err
		}
	}
	// The member's permission prompts go to the fleet. Claude Code stops
	// a hook after 60 s unless told; this one waits up to its own bound.
	if err := setHook(hooks, setPath, "PermissionRequest", permissionHook(bin), permissionHookTimeout); err != nil {
		return nil, err
	}
	if w, err := writeJSONObject(setPath, set); err != nil {
		return nil, err
	} else if w {
		changed = append(changed, setPath)
	}
	return changed, nil
}

// permissionWait is how long the PermissionRequest hook fleetstate up
// writes waits for a decision, and permissionHookTimeout the seconds
// after which the agent stops the hook (Claude Code's default is 60).
const (
	permissionWait        = 2 * time.Minute
	permissionHookTimeout = int(permissionWait/time.Second) + 15
)

// permissionHook is the PermissionRequest hook's command; outside a
// fleet it prints nothing, and the agent asks as usual.
func permissionHook(bin string) string {
	return `test -z "$FLEET_TOKEN" || ` + shellQuote(bin) + " hook permission --timeout " + permissionWait.String() + " " + hookMarker
}

// setHook makes the hook command cmd run on event, stopped after timeout
// seconds if positive (else the agent's default): it updates the command
// fleetstate up wrote before, or adds a matcher group with it.
func setHook(hooks map[string]any, path, event, cmd string, timeout int) error {
	groups, ok := hooks[event].([]any)
	if hooks[event] != nil && !ok {
		return fmt.Errorf("%s: hooks.%s is not a list: fix it, and run fleetstate up again", path, event)
	}
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		list, _ := gm["hooks"].([]any)
		for _, h := range list {
			hm, _ := h.(map[string]any)
			if c, _ := hm["command"].(string); strings.HasSuffix(c, hookMarker) {
				hm["command"] = cmd
				if timeout > 0 {
					hm["timeout"] = timeout
				}
				return nil
			}
		}
	}
	h := map[string]any{"type": "command", "command": cmd}
	if timeout > 0 {
		h["timeout"] = timeout
	}
	hooks[event] = append(groups, map[string]any{"hooks": []any{h}})
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
// home, the CODEX_HOME of one agent, and the permission request hook into
// its hooks.json. A new home starts from the user's
// own configuration (~/.codex or $CODEX_HOME) and links its login, so the
// agent runs as the user's Codex does.
func WriteCodexConfig(home, bin, url string) ([]string, error) {
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
	text := replaceTOMLTable(string(old), "mcp_servers.fleetstate", codexBlock(bin, url))
	var changed []string
	if w, err := WriteIfChanged(path, []byte(text), true); err != nil {
		return nil, err
	} else if w {
		changed = append(changed, path)
	}
	// The permission request hook, in the hooks.json of the agent's own
	// CODEX_HOME: Codex reads the hooks of the user's layer whatever the
	// project's trust, in the shape Claude Code's settings have.
	hooksPath := filepath.Join(home, "hooks.json")
	obj, err := readJSONObject(hooksPath)
	if err != nil {
		return nil, err
	}
	hooks, err := object(obj, hooksPath, "hooks")
	if err != nil {
		return nil, err
	}
	if err := setHook(hooks, hooksPath, "PermissionRequest", permissionHook(bin), permissionHookTimeout); err != nil {
		return nil, err
	}
	if w, err := writeJSONObject(hooksPath, obj); err != nil {
		return nil, err
	} else if w {
		changed = append(changed, hooksPath)
	}
	return changed, nil
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
