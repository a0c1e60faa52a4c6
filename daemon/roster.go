package daemon

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/internal/usage"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/fleetstate/fleetstate/tmux"
)

// Roster names the agents of a fleet and where each lives: the fleet file.
// A daemon reads it at its start ([Config].Roster, serve --roster FILE);
// fleetstate up reads the same file, starts each agent that has a command
// in a pane of its own, and starts the daemon with the file as its
// roster. A Roster is not changed once loaded.
//
// An agent with a command lives in a pane of its own in the roster's
// session, tagged with its name ([tmux.AgentOption]) and shown in a
// window named after it; an agent with a tmux target lives in a pane
// somebody else started; an agent with neither is a member that pulls
// its work with fleet_next (or a lead that is nudged nowhere).
type Roster struct {
	// TmuxSocket is the socket of the tmux server the panes run on. A
	// relative path is taken from the file's folder. Empty means
	// tmux.sock in the state directory's private folder: a tmux server of
	// the fleet's own, which touches none of the user's sessions.
	TmuxSocket string `json:"tmux_socket,omitempty"`
	// TmuxSession is the tmux session fleetstate up creates, one window
	// per agent with a command. Empty means "fleet".
	TmuxSession string `json:"tmux_session,omitempty"`
	// Programs holds screen patterns per agent program, for agents whose
	// status no hook reports. "claude" and "codex" have built-in patterns
	// that an entry here replaces.
	Programs map[string]*tmux.Patterns `json:"programs,omitempty"`
	// Timeouts are the rendezvous bounds of the daemon fleetstate up
	// starts, by the name of serve's flag without "-timeout": "send",
	// "ask", "ready", "rejoin" (Go durations, "20s"), and "permission",
	// how long the members' PermissionRequest hook waits for a decision
	// before the agent's own prompt shows (default 2m). A daemon started
	// by hand takes its flags instead.
	Timeouts map[string]string `json:"timeouts,omitempty"`
	// Notify is the command of the daemon fleetstate up starts that is
	// run for each event a person should see (serve --notify; up
	// --notify replaces it). A daemon started by hand takes its flag.
	Notify string `json:"notify,omitempty"`
	// Approvals are the rules that decide the members' permission
	// requests without asking, and whether leads may decide them.
	Approvals *Approvals `json:"approvals,omitempty"`
	// Trust is the person's consent that fleetstate up answer, for every
	// agent, the first-run questions of Claude Code and Codex about the
	// folders and hooks it sets up: the trust of the agent's workdir (as
	// each CLI keys it) and Codex's review of the hooks up wrote. Without
	// it, an agent that has not been trusted there waits on the question
	// in its pane and reads BLOCKED. An agent's own Trust gives the same
	// consent for that agent alone.
	Trust bool `json:"trust,omitempty"`
	// Merge sets how a member's work tree is merged back.
	Merge *MergeSettings `json:"merge,omitempty"`
	// Remote is the git remote (a URL, or a path every machine shares)
	// through which a member's branch reaches the lead's checkout on a
	// fleet kept in NATS, whose agents run on several machines: the
	// member's daemon pushes the branch there, the lead's fetches it.
	// Work trees on NATS need it; a fleet on disk does not use it.
	Remote string `json:"remote,omitempty"`
	// Budget is the whole fleet's budget, in tokens or in cost (see
	// fleetstate.Rendezvous.SetBudget); an agent's own is RosterAgent.Budget.
	// A daemon sets the budgets the file changed since a daemon last read
	// it, so that one the operator raised meanwhile (fleetstate budget)
	// survives a restart.
	Budget *fleetstate.Budget `json:"budget,omitempty"`
	// Prices are what each model's tokens cost, per million tokens, for
	// the budgets in cost and the cost the views show; "*" prices every
	// model not named (see fleetstate.Rendezvous.SetPrices). No price is
	// built in. A daemon sets them each time it reads the file.
	Prices map[string]fleetstate.Price `json:"prices,omitempty"`
	Agents []RosterAgent               `json:"agents"`

	// base is the folder of the file, which relative paths start from.
	base string
}

// RosterAgent is one agent of a roster.
type RosterAgent struct {
	Name string `json:"name"`
	Role string `json:"role"` // lead or member
	// Tmux is the agent's pane as a tmux target ("fleet:0.1", "%3") when
	// someone other than fleetstate up started it; empty for an agent
	// with a command, and for a member that pulls its messages.
	Tmux string `json:"tmux,omitempty"`
	// Program is what runs in the pane: "claude" (Claude Code: fleetstate
	// up writes its .mcp.json and status hooks into the workdir), "codex"
	// (Codex: its config.toml in a CODEX_HOME of the agent's own), or a
	// name of Roster.Programs, whose screen patterns tell the status.
	Program string `json:"program,omitempty"`
	// Command is the argv fleetstate up starts in the agent's pane, with
	// FLEET_AGENT, FLEET_ROLE, FLEET_TOKEN and FLEET_URL in its
	// environment.
	Command []string `json:"command,omitempty"`
	// Workdir is the folder the command starts in; relative to the
	// file's folder; empty means the file's folder.
	Workdir string `json:"workdir,omitempty"`
	// Env holds more environment variables for the command.
	Env map[string]string `json:"env,omitempty"`
	// Trust is Roster.Trust for this agent alone.
	Trust bool `json:"trust,omitempty"`
	// Worktree gives a member a git work tree of its own, which becomes
	// its workdir: true, or an object naming its branch and base.
	Worktree *Worktree `json:"worktree,omitempty"`
	// Budget is the member's budget (see Roster.Budget).
	Budget *fleetstate.Budget `json:"budget,omitempty"`
}

// PermissionWait returns how long the members' PermissionRequest hook
// waits for a decision: timeouts.permission, or zero for the default.
func (ro *Roster) PermissionWait() time.Duration {
	d, _ := time.ParseDuration(ro.Timeouts["permission"])
	return d
}

// Trusted reports whether the person consented that fleetstate up answer
// a's first-run questions (Roster.Trust, or a's own).
func (ro *Roster) Trusted(a RosterAgent) bool { return ro.Trust || a.Trust }

// Built-in programs: the coding-agent CLIs whose configuration fleetstate
// up writes.
const (
	ProgramClaude = "claude"
	ProgramCodex  = "codex"
)

// builtinPatterns read the status of the built-in programs off the
// screen: the program's question whatever its hooks say, and the rest
// until its hooks report a status (internal/agent holds them, with the
// screens that hold them).
func builtinPatterns(program string) *tmux.Patterns {
	p, ok := agent.ScreenPatternsOf(program)
	if !ok {
		return nil
	}
	return &tmux.Patterns{Working: p.Working, Blocked: p.Blocked, Idle: p.Idle}
}

// maxRosterBytes bounds a fleet file: far more than any fleet needs.
const maxRosterBytes = 1 << 20

// maxSocketPath is the longest socket path a Unix socket address holds
// (108 bytes on Linux, 104 on the BSDs), with its terminating NUL.
const maxSocketPath = 103

// defaultSession is the tmux session of a fleet file that names none.
const defaultSession = "fleet"

// reservedEnv are the variables fleetstate up sets itself.
var reservedEnv = []string{"FLEET_AGENT", "FLEET_ROLE", "FLEET_TOKEN", "FLEET_URL"}

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// sessionRE keeps session names out of tmux's target syntax.
	sessionRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	indexRE   = regexp.MustCompile(`\.(\d+)`)
)

// LoadRoster reads the fleet file at path and checks all of it: every
// error names the field ("agents[2].command: empty"). stateDir is the
// state directory the fleet runs on, for the default tmux socket.
func LoadRoster(path, stateDir string) (*Roster, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fleet file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRosterBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fleet file %s: %w", path, err)
	}
	if len(data) > maxRosterBytes {
		return nil, fmt.Errorf("fleet file %s: larger than %d bytes", path, maxRosterBytes)
	}
	ro, err := parseRoster(data)
	if err != nil {
		return nil, fmt.Errorf("fleet file %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	ro.base = filepath.Dir(abs)
	if err := ro.resolve(stateDir); err != nil {
		return nil, fmt.Errorf("fleet file %s: %w", path, err)
	}
	return ro, nil
}

// parseRoster decodes a fleet file strictly (an unknown field is a
// mistake worth hearing of) and checks what can be checked without the
// file system.
func parseRoster(data []byte) (*Roster, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ro Roster
	if err := dec.Decode(&ro); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Errorf("%s: want a JSON %s, not %s", typeErrorField(data, te), jsonKind(te.Type.Kind().String()), te.Value)
		}
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	if err := ro.validate(); err != nil {
		return nil, err
	}
	return &ro, nil
}

// typeErrorField names the field of te, a type error of the fleet file
// data, as agents[2].command. The index of an agent is found here, by
// decoding the agents one by one: encoding/json's te.Field has it
// (agents.2.command) on some Go releases and not on others
// (agents.command).
func typeErrorField(data []byte, te *json.UnmarshalTypeError) string {
	field := te.Field
	if strings.HasPrefix(field, "agents.") {
		var f struct {
			Agents []json.RawMessage `json:"agents"`
		}
		_ = json.Unmarshal(data, &f) // the agents that decode are enough
		for i, raw := range f.Agents {
			var a RosterAgent
			var ate *json.UnmarshalTypeError
			if errors.As(json.Unmarshal(raw, &a), &ate) && ate.Field != "" {
				field = "agents." + strconv.Itoa(i) + "." + ate.Field
				break
			}
		}
	}
	return indexRE.ReplaceAllString(field, "[$1]") // agents.2.command: agents[2].command
}

func jsonKind(goKind string) string {
	switch goKind {
	case "slice":
		return "array"
	case "map", "struct", "ptr":
		return "object"
	}
	return goKind
}

// validate checks the fields of the file one by one.
func (ro *Roster) validate() error {
	if ro.TmuxSession != "" && !sessionRE.MatchString(ro.TmuxSession) {
		return fmt.Errorf("tmux_session: %q: use letters, digits, - and _ only", ro.TmuxSession)
	}
	names := make([]string, 0, len(ro.Programs))
	for name := range ro.Programs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := ro.Programs[name]
		if p == nil {
			return fmt.Errorf("programs.%s: want an object of patterns, not null", name)
		}
		for _, set := range []struct {
			key string
			res []string
		}{{"working", p.Working}, {"blocked", p.Blocked}, {"idle", p.Idle}} {
			for i, re := range set.res {
				if _, err := regexp.Compile("(?m)" + re); err != nil {
					return fmt.Errorf("programs.%s.%s[%d]: %v", name, set.key, i, err)
				}
			}
		}
	}
	for _, k := range sortedKeys(ro.Timeouts) {
		switch k {
		case "send", "ask", "ready", "rejoin", "permission":
		default:
			return fmt.Errorf("timeouts.%s: not a timeout: want send, ask, ready, rejoin or permission", k)
		}
		if d, err := time.ParseDuration(ro.Timeouts[k]); err != nil || d <= 0 {
			return fmt.Errorf("timeouts.%s: %q is not a positive duration such as \"20s\"", k, ro.Timeouts[k])
		} else if k == "permission" && d > fleetstate.MaxPermissionTimeout {
			return fmt.Errorf("timeouts.permission: %v is longer than a permission request may wait (%v)", d, fleetstate.MaxPermissionTimeout)
		}
	}
	if b := ro.Budget; b != nil {
		if err := b.Check(); err != nil {
			return fmt.Errorf("budget: %v", err)
		}
	}
	if err := usage.Prices(ro.Prices).Check(); err != nil {
		return fmt.Errorf("prices: %v", err)
	}
	for _, a := range ro.Agents {
		if b := a.Budget; b != nil {
			if err := b.Check(); err != nil {
				return fmt.Errorf("agents: %s: budget: %v", a.Name, err)
			}
			if a.Role != "member" {
				return fmt.Errorf("agents: %s: budget: only a member has a budget", a.Name)
			}
		}
	}
	if ro.Approvals != nil {
		if err := ro.Approvals.validate(); err != nil {
			return err
		}
	}
	seen := map[string]int{}
	for i, a := range ro.Agents {
		at := fmt.Sprintf("agents[%d]", i)
		if a.Name == "" {
			return fmt.Errorf("%s.name: empty", at)
		}
		if err := mcpadapter.CheckAgentName(a.Name); err != nil {
			return fmt.Errorf("%s.name: %w", at, err)
		}
		if j, dup := seen[a.Name]; dup {
			return fmt.Errorf("%s.name: %q is agents[%d]'s name already", at, a.Name, j)
		}
		seen[a.Name] = i
		if _, err := mcpadapter.ParseRole(a.Role); err != nil {
			return fmt.Errorf("%s.role: %q: want lead or member", at, a.Role)
		}
		if a.Program != "" && ro.Programs[a.Program] == nil && builtinPatterns(a.Program) == nil {
			return fmt.Errorf("%s.program: %q is not claude, codex, or a name under programs", at, a.Program)
		}
		if a.Command != nil {
			if len(a.Command) == 0 || a.Command[0] == "" {
				return fmt.Errorf("%s.command: empty", at)
			}
			for j, arg := range a.Command {
				if strings.ContainsRune(arg, 0) {
					return fmt.Errorf("%s.command[%d]: holds a NUL byte", at, j)
				}
			}
			if a.Tmux != "" {
				return fmt.Errorf("%s.tmux: an agent with a command lives in the pane fleetstate up makes; drop tmux or command", at)
			}
		}
		if a.Command == nil {
			if a.Workdir != "" {
				return fmt.Errorf("%s.workdir: only an agent with a command has one", at)
			}
			if len(a.Env) > 0 {
				return fmt.Errorf("%s.env: only an agent with a command has one", at)
			}
		}
		for k, v := range a.Env {
			if !envNameRE.MatchString(k) {
				return fmt.Errorf("%s.env: %q is not a variable name", at, k)
			}
			for _, r := range reservedEnv {
				if k == r {
					return fmt.Errorf("%s.env.%s: fleetstate up sets it; remove it", at, k)
				}
			}
			if strings.ContainsRune(v, 0) {
				return fmt.Errorf("%s.env.%s: holds a NUL byte", at, k)
			}
		}
		if strings.ContainsRune(a.Workdir, 0) {
			return fmt.Errorf("%s.workdir: holds a NUL byte", at)
		}
		if err := ro.validateWorktree(i); err != nil {
			return err
		}
	}
	if strings.ContainsRune(ro.Remote, 0) || strings.HasPrefix(ro.Remote, "-") {
		return errors.New("remote: a git URL or path, without a NUL byte, not beginning with -")
	}
	if ro.Merge != nil {
		if ro.Merge.Approval && ro.Approvals != nil && ro.Approvals.Leads {
			return errors.New("merge.approval: with approvals.leads a lead could allow its own merge; a person's approval needs leads that do not decide")
		}
		return ro.Merge.validate()
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ServeFlags returns the flags of serve that the file's timeouts and
// notify command stand for.
func (ro *Roster) ServeFlags() []string {
	var out []string
	for _, k := range sortedKeys(ro.Timeouts) {
		if k != "permission" { // the hooks', not the daemon's
			out = append(out, "--"+k+"-timeout", ro.Timeouts[k])
		}
	}
	if ro.Notify != "" {
		out = append(out, "--notify", ro.Notify)
	}
	return out
}

// resolve makes the file's paths absolute and checks them: the tmux
// socket fits a socket address, and every workdir is a folder.
func (ro *Roster) resolve(stateDir string) error {
	if ro.TmuxSession == "" {
		ro.TmuxSession = defaultSession
	}
	dir := cmp.Or(stateDir, fleetstate.DefaultDir())
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	private := filepath.Join(abs, ".fleetstate") // Store.PrivatePath's folder
	switch {
	case ro.TmuxSocket == "":
		ro.TmuxSocket = filepath.Join(private, "tmux.sock")
	case !filepath.IsAbs(ro.TmuxSocket):
		ro.TmuxSocket = filepath.Join(ro.base, ro.TmuxSocket)
	}
	if len(ro.TmuxSocket) > maxSocketPath {
		return fmt.Errorf("tmux_socket: %s is longer than a socket address holds (%d bytes); name a shorter path in tmux_socket", ro.TmuxSocket, maxSocketPath)
	}
	for i := range ro.Agents {
		a := &ro.Agents[i]
		if a.Command == nil {
			continue
		}
		switch {
		case a.Workdir == "":
			a.Workdir = ro.base
		case !filepath.IsAbs(a.Workdir):
			a.Workdir = filepath.Join(ro.base, a.Workdir)
		}
		fi, err := os.Stat(a.Workdir)
		if err != nil {
			return fmt.Errorf("agents[%d].workdir: %v", i, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("agents[%d].workdir: %s is not a folder", i, a.Workdir)
		}
		if a.Worktree != nil {
			if err := a.Worktree.resolve(a, private); err != nil {
				return fmt.Errorf("agents[%d].worktree: %w", i, err)
			}
		}
	}
	return nil
}

// patterns returns the screen patterns of a's program: the file's, or
// the built-in ones of claude and codex.
func (ro *Roster) patterns(a RosterAgent) *tmux.Patterns {
	if a.Program == "" {
		return nil
	}
	if p := ro.Programs[a.Program]; p != nil {
		return p
	}
	return builtinPatterns(a.Program)
}

// apply registers the roster's agents with the rendezvous and returns the
// panes by agent name, for the hooks' status reports.
func (ro *Roster) apply(rv *fleetstate.Rendezvous) (map[string]*tmux.Pane, error) {
	panes, err := ro.panes()
	if err != nil {
		return nil, err
	}
	for _, a := range ro.Agents {
		role, _ := mcpadapter.ParseRole(a.Role) // panes checked it
		var port fleetstate.Member
		if p := panes[a.Name]; p != nil {
			port = p
		}
		switch {
		case role == mcpadapter.RoleMember:
			err = rv.AddMember(a.Name, port)
		case port != nil:
			err = rv.SetLeadPort(a.Name, port)
		}
		if err != nil {
			return nil, err
		}
	}
	return panes, nil
}

// panes returns the roster's tmux panes by agent name.
func (ro *Roster) panes() (map[string]*tmux.Pane, error) {
	panes := map[string]*tmux.Pane{}
	var srv *tmux.Server
	for i, a := range ro.Agents {
		if _, err := mcpadapter.ParseRole(a.Role); err != nil {
			return nil, fmt.Errorf("roster: agents[%d].role: %w", i, err)
		}
		if a.Command == nil && a.Tmux == "" {
			continue
		}
		if srv == nil {
			srv = tmux.NewServer(ro.TmuxSocket)
		}
		opts := &tmux.PaneOptions{Patterns: ro.patterns(a), InterruptCommands: agent.InterruptCommands(a.Program)}
		var p *tmux.Pane
		var err error
		if a.Command != nil {
			// The pane fleetstate up started, found by the agent's name
			// in its tmux.AgentOption, never by the name as a target.
			p, err = tmux.NewAgentPane(srv, ro.TmuxSession, a.Name, opts)
		} else {
			p, err = tmux.NewPane(srv, a.Tmux, opts)
		}
		if err != nil {
			return nil, fmt.Errorf("roster: agents[%d]: %w", i, err)
		}
		panes[a.Name] = p
	}
	return panes, nil
}

// reportTo returns the OnStatus hook of the HTTP handler: a report goes to
// the agent's pane and wakes the rendezvous.
func reportTo(rv *fleetstate.Rendezvous, panes map[string]*tmux.Pane) func(mcpadapter.Identity, fleetstate.Status) error {
	return func(id mcpadapter.Identity, st fleetstate.Status) error {
		if p := panes[id.Agent]; p != nil {
			p.Report(st)
			rv.Wake(id.Agent)
		}
		return nil
	}
}
