// Package fleetup is what fleetstate up and down do besides parsing
// flags and printing: the record of the fleet that up brought up, the
// daemon it starts in the background, the agents' tmux panes, and the
// stopping of both by down.
//
// It is internal: the fleetstate command is its only user.
package fleetup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/agentconf"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/fleetstate/fleetstate/tmux"
)

// What fleetstate up keeps in the state directory's private folder:
//
//	up.json           the fleet it brought up: daemon pid and URL, the fleet
//	                  file, the tmux socket and session (Record)
//	daemon.log        the standard error of the daemon it started
//	agents/NAME/env   the agent's environment, token included (owner-only)
//	agents/NAME/codex the CODEX_HOME of a Codex agent
//	tmux.sock         the tmux server of the fleet, unless the file names one
const (
	RecordFile = "up.json"
	DaemonLog  = "daemon.log"
)

// The bounds of up and down, each with its reason.
const (
	// DaemonStartWait bounds the wait for a daemon to own the directory:
	// it opens the store and replays the journal first, which takes
	// milliseconds, or seconds for a large journal on a slow disk.
	DaemonStartWait = 30 * time.Second
	// StopWait is how long down lets an agent or the daemon end after
	// SIGTERM before SIGKILL: the daemon's own shutdown is bounded at 5 s.
	StopWait = 8 * time.Second
	// SettleWait is how long up watches new panes for a command that
	// exits at once (a typo in its argv, a missing login), to report it
	// instead of leaving a dead pane.
	SettleWait = 500 * time.Millisecond
)

// Record is what up.json holds.
type Record struct {
	PID     int    `json:"pid"` // of the daemon up started; 0 after down
	URL     string `json:"url"`
	File    string `json:"file"`
	Socket  string `json:"tmux_socket"`
	Session string `json:"tmux_session"`
	// FileSum is the SHA-256 of the fleet file the daemon read at its
	// start: it reads it only then.
	FileSum string `json:"file_sha256,omitempty"`
}

// ReadRecord reads the record of store's fleet; ok is false when there is
// none, or it is not one.
func ReadRecord(store *fleetstate.Store) (Record, bool) {
	var rec Record
	data, err := os.ReadFile(store.PrivatePath(RecordFile))
	if err != nil || json.Unmarshal(data, &rec) != nil {
		return Record{}, false
	}
	return rec, true
}

// WriteRecord writes rec as the record of store's fleet.
func WriteRecord(store *fleetstate.Store, rec Record) error {
	data, _ := json.MarshalIndent(rec, "", "  ")
	_, err := agentconf.WriteIfChanged(store.PrivatePath(RecordFile), append(data, '\n'), true)
	return err
}

// CheckCommands checks that tmux and every agent's program can be found,
// before anything starts.
func CheckCommands(ro *daemon.Roster) error {
	need := false
	for i, a := range ro.Agents {
		if a.Command == nil {
			continue
		}
		need = true
		prog := a.Command[0]
		if strings.Contains(prog, "/") {
			if !filepath.IsAbs(prog) {
				prog = filepath.Join(a.Workdir, prog)
			}
			if fi, err := os.Stat(prog); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return fmt.Errorf("agents[%d].command[0]: %s is not an executable file", i, prog)
			}
		} else if _, err := exec.LookPath(prog); err != nil {
			return fmt.Errorf("agents[%d].command[0]: %q is not in $PATH: install it, or give its full path", i, prog)
		}
	}
	if _, err := exec.LookPath("tmux"); need && err != nil {
		return errors.New("up: tmux is not installed, and the agents with a command run in tmux panes: install it (apt-get install tmux, brew install tmux)")
	}
	return nil
}

// LaunchDaemon starts `fleetstate serve` on store's directory in the
// background, detached, its output appended to daemon.log, and waits for
// it to own the directory and to have written its operator token. It
// returns the daemon's pid and URL.
func LaunchDaemon(ctx context.Context, store *fleetstate.Store, bin, addr, roster string, flags []string) (int, string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	logPath := store.PrivatePath(DaemonLog)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, "", fmt.Errorf("up: daemon log: %v", err)
	}
	defer logf.Close()
	start, _ := logf.Seek(0, io.SeekEnd)
	oldToken, _ := auth.OperatorToken(store)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr, "--dir", store.Dir(), "--roster", roster}, flags...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = store.Dir()
	detach(cmd)
	if err := cmd.Start(); err != nil {
		return 0, "", fmt.Errorf("up: start the daemon: %v", err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(DaemonStartWait)
	for {
		// The daemon owns the directory before it reads the fleet file
		// and writes its own operator token: it serves once the token
		// it wrote is there, not the one of the daemon before it.
		if o, owned, _ := store.FleetOwner(); owned && o.PID == pid && strings.HasPrefix(o.Addr, "http") {
			if tok, err := auth.OperatorToken(store); err == nil && tok != oldToken {
				_ = cmd.Process.Release()
				return pid, o.Addr, nil
			}
		}
		if exitedChild(pid) {
			return 0, "", fmt.Errorf("up: the daemon (fleetstate serve --addr %s) exited at once:\n%s", addr, logTail(logPath, start))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return 0, "", fmt.Errorf("up: the daemon did not take the state directory within %v; its log:\n%s", DaemonStartWait, logTail(logPath, start))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail returns what was appended to the log at path from offset on,
// its last 2 KiB at most.
func logTail(path string, from int64) string {
	data, _ := os.ReadFile(path)
	if from < int64(len(data)) {
		data = data[from:]
	} else {
		data = nil
	}
	if len(data) > 2048 {
		data = data[len(data)-2048:]
	}
	return strings.TrimSpace(string(data))
}

// listPanes lists the panes of session on srv by agent: the agent its
// tmux.AgentOption names, or for a pane without one (started by an up
// that did not tag its panes) the name of its window. exists is false
// when there is no such session, or no server.
func listPanes(ctx context.Context, srv *tmux.Server, session string) (panes map[string]tmux.SessionPane, exists bool, err error) {
	list, exists, err := srv.SessionPanes(ctx, session)
	if err != nil || !exists {
		return nil, exists, err
	}
	panes = map[string]tmux.SessionPane{}
	for _, p := range list {
		if _, dup := panes[p.Agent]; p.Agent != "" && !dup {
			panes[p.Agent] = p
		}
	}
	for _, p := range list {
		if _, dup := panes[p.Window]; p.Agent == "" && !dup {
			panes[p.Window] = p
		}
	}
	return panes, true, nil
}

// PaneOutputLines is how many of its last lines a pane whose command
// ended at once shows in up's error.
const PaneOutputLines = 40

// StartPanes makes the session and a pane for every agent with a command
// whose pane is missing or dead; running panes are left alone. Each pane
// is tagged with its agent's name (tmux.AgentOption), by which it is
// found from then on, and addressed by its ID: the name is never a tmux
// target. It returns the agents it started.
//
// A command that ends within SettleWait fails StartPanes with what its
// pane printed; every pane this run started is then killed again (the
// session too, if this run made it), so that nothing of it is left.
func StartPanes(ctx context.Context, ro *daemon.Roster, envPaths map[string]string) ([]string, error) {
	srv := tmux.NewServer(ro.TmuxSocket)
	panes, exists, err := listPanes(ctx, srv, ro.TmuxSession)
	if err != nil {
		return nil, fmt.Errorf("up: tmux: %v", err)
	}
	made := !exists // this run makes the session
	var started []string
	ids := map[string]string{} // the panes started, by agent
	fail := func(err error) ([]string, error) {
		removePanes(srv, ro.TmuxSession, made, ids)
		return nil, err
	}
	for i, a := range ro.Agents {
		if a.Command == nil {
			continue
		}
		p, ok := panes[a.Name]
		if ok && !p.Dead {
			if p.Agent != "" {
				continue
			}
			if err := srv.TagAgent(ctx, p.ID, a.Name); err != nil {
				return fail(fmt.Errorf("up: agents[%d] (%s): tag its pane: %v", i, a.Name, err))
			}
			continue
		}
		if !exists {
			if err := os.MkdirAll(filepath.Dir(ro.TmuxSocket), 0o700); err != nil {
				return fail(fmt.Errorf("up: tmux socket: %v", err))
			}
		}
		id, err := startPane(ctx, srv, ro.TmuxSession, a, agentconf.Launcher(envPaths[a.Name], a.Command), p.ID, !exists)
		if id != "" {
			ids[a.Name] = id
		}
		if err != nil {
			return fail(fmt.Errorf("up: agents[%d] (%s): start its pane: %v", i, a.Name, err))
		}
		exists = true
		started = append(started, a.Name)
	}
	if len(started) == 0 {
		return nil, nil
	}
	// A command that ends at once is a mistake worth reporting now.
	time.Sleep(SettleWait)
	panes, _, err = listPanes(ctx, srv, ro.TmuxSession)
	if err != nil {
		return fail(fmt.Errorf("up: tmux: %v", err))
	}
	var dead []string
	for _, name := range started {
		if p, ok := panes[name]; !ok || p.Dead {
			screen := deadScreen(ctx, srv, ids[name])
			dead = append(dead, fmt.Sprintf("%s: its command ended at once; its pane shows:\n%s", name, lastLines(screen, PaneOutputLines)))
		}
	}
	if len(dead) > 0 {
		return fail(fmt.Errorf("up: %s\n(up removed the panes it had started: fix the command in the fleet file and run fleetstate up again)", strings.Join(dead, "\n")))
	}
	for _, name := range started {
		_, _ = srv.Run(ctx, "", "pipe-pane", "-t", ids[name]) // startPane's pipe, no longer needed
	}
	return started, nil
}

// deadScreen captures the dead pane id, whole, and again for a moment
// while it shows nothing but tmux's "Pane is dead" line: under load tmux
// may mark a pane dead before it has read its command's last output.
func deadScreen(ctx context.Context, srv *tmux.Server, id string) string {
	var screen string
	for try := 0; try < 20; try++ {
		screen, _ = srv.Run(ctx, "", "capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", id)
		for _, l := range strings.Split(screen, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "Pane is dead") {
				return screen
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	return screen
}

// startPane starts argv, agent a's launcher, in a pane of session on srv
// and returns the pane's ID: in the dead pane respawn when there is one,
// else in a new window named after the agent, in a new session when
// newSession is set. The pane is tagged with the agent's name in the same
// tmux call that makes it, so that it is never found untagged, and given
// a pipe (pipe-pane) that StartPanes closes after SettleWait: while a pane
// has a pipe, tmux reads all its command printed before it marks the
// pane dead. Without one, tmux 3.3 now and then marks a pane whose
// command printed and ended within its first milliseconds dead before it
// reads the output, and the pane shows nothing.
func startPane(ctx context.Context, srv *tmux.Server, session string, a daemon.RosterAgent, argv []string, respawn string, newSession bool) (string, error) {
	// The window's name and the start directory are read as tmux formats:
	// Format keeps them as they are.
	cwd := tmux.Format(a.Workdir)
	if respawn != "" {
		_, err := srv.RunAll(ctx, "",
			append([]string{"respawn-pane", "-k", "-t", respawn, "-c", cwd}, argv...),
			[]string{"set-option", "-p", "-t", respawn, "--", tmux.AgentOption, a.Name},
			[]string{"pipe-pane", "-t", respawn, "cat >/dev/null"})
		return respawn, err
	}
	// The new window is named by a name of its own until it is tagged:
	// the agent's name may be any window's name, or no valid target.
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "fleetstate-new-" + hex.EncodeToString(rnd[:])
	target := "=" + session + ":=" + tmp
	var cmds [][]string
	if newSession {
		// The panes stay when their command ends, so that what it printed
		// can be read; up starts them again.
		cmds = append(cmds,
			[]string{"set-option", "-g", "remain-on-exit", "on"}, // the server is the fleet's own
			append([]string{"new-session", "-d", "-s", session, "-n", tmp, "-x", "200", "-y", "50", "-P", "-F", "#{pane_id}", "-c", cwd}, argv...))
	} else {
		cmds = append(cmds, append([]string{"new-window", "-d", "-t", "=" + session + ":", "-n", tmp, "-P", "-F", "#{pane_id}", "-c", cwd}, argv...))
	}
	cmds = append(cmds,
		[]string{"set-option", "-p", "-t", target, "--", tmux.AgentOption, a.Name},
		[]string{"pipe-pane", "-t", target, "cat >/dev/null"},
		[]string{"rename-window", "-t", target, "--", tmux.Format(a.Name)}) // "--": a name may start with "-"
	out, err := srv.RunAll(ctx, "", cmds...)
	id := strings.TrimSpace(out)
	if !strings.HasPrefix(id, "%") || strings.ContainsAny(id, " \n") {
		if err == nil {
			err = fmt.Errorf("tmux printed %q, not the new pane's ID", out)
		}
		id = ""
	}
	return id, err
}

// removePanes kills the panes of ids; when this run made the session
// (made), the whole session, and then the server if no session is left
// on it. It is StartPanes' cleanup after a failure, and does its best:
// its own errors are not reported over the failure's.
func removePanes(srv *tmux.Server, session string, made bool, ids map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), StopWait)
	defer cancel()
	if made {
		_, _ = srv.Run(ctx, "", "kill-session", "-t", "="+session)
		if out, err := srv.Run(ctx, "", "list-sessions", "-F", "#{session_name}"); err == nil && strings.TrimSpace(out) == "" {
			_ = srv.Kill(ctx)
		}
		return
	}
	for _, id := range ids {
		_, _ = srv.Run(ctx, "", "kill-pane", "-t", id)
	}
}

// lastLines returns the last n lines of a pane's text s, each run of
// blank lines made one: tmux shows a dead pane's message on the screen's
// last line, far below what the command printed.
func lastLines(s string, n int) string {
	var ls []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		l = strings.TrimRight(l, " ")
		if l == "" && len(ls) > 0 && ls[len(ls)-1] == "" {
			continue
		}
		ls = append(ls, l)
	}
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// StopPanes stops the agents of rec's tmux session: SIGTERM to each
// pane's process group, and to the processes the agents left with a
// CODEX_HOME of the fleet's, a bounded wait, SIGKILL; then the session, and the
// fleet's tmux server with it when no other session is left on it (its
// socket too, when it is in store's private folder). It returns how many
// agents stopped.
func StopPanes(ctx context.Context, store *fleetstate.Store, rec Record) (int, error) {
	srv := tmux.NewServer(rec.Socket)
	panes, _, err := srv.SessionPanes(ctx, rec.Session)
	if err != nil {
		return 0, fmt.Errorf("down: tmux: %v", err)
	}
	var pids []int
	for _, p := range panes {
		if !p.Dead && p.PID > 0 {
			pids = append(pids, p.PID)
		}
	}
	stopped := StopAll(pids, Alive)
	// Codex starts daemons of its own (codex app-server) that leave the
	// pane's process group and outlive it: the agents' CODEX_HOMEs name
	// them.
	StopAll(ProcessesWithEnv("CODEX_HOME", store.PrivatePath("agents")), Alive)
	if len(panes) > 0 {
		if _, err := srv.Run(ctx, "", "kill-session", "-t", "="+rec.Session); err != nil && !errors.Is(err, fleetstate.ErrMemberGone) {
			return stopped, fmt.Errorf("down: tmux: %v", err)
		}
	}
	if out, err := srv.Run(ctx, "", "list-sessions", "-F", "#{session_name}"); err == nil && strings.TrimSpace(out) == "" || errors.Is(err, fleetstate.ErrMemberGone) {
		_ = srv.Kill(ctx)
		if filepath.Dir(rec.Socket) == filepath.Dir(store.PrivatePath("tmux.sock")) {
			_ = os.Remove(rec.Socket)
		}
	}
	return stopped, nil
}

// StopAll sends SIGTERM to every pid's process group, waits up to
// StopWait for running(pid) to turn false for all, then sends SIGKILL to
// the rest and waits a little more. It returns how many stopped.
func StopAll(pids []int, running func(int) bool) int {
	for _, pid := range pids {
		SignalTree(pid, syscall.SIGTERM)
	}
	left := func() []int {
		var out []int
		for _, pid := range pids {
			if running(pid) {
				out = append(out, pid)
			}
		}
		return out
	}
	none := func() bool { return len(left()) == 0 }
	WaitFor(StopWait, none)
	for _, pid := range left() {
		SignalTree(pid, syscall.SIGKILL)
	}
	WaitFor(2*time.Second, none)
	return len(pids) - len(left())
}

// WaitFor checks done every 20 ms until it holds or within has passed,
// and reports whether it held.
func WaitFor(within time.Duration, done func() bool) bool {
	deadline := time.Now().Add(within)
	for !done() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// UpConfig is what Up brings up, and how.
type UpConfig struct {
	Store  *fleetstate.Store
	Tokens *auth.Tokens
	Roster *daemon.Roster
	// Bin is the fleetstate binary the daemon, the proxies and the hooks
	// run; Addr the address asked for the daemon ("": the last one, else
	// a free port).
	Bin, Addr string
	// File is the fleet file's absolute path, FileSum its SHA-256.
	File, FileSum string
	// Stderr hears what the user should know but is no error.
	Stderr io.Writer
}

// Upped is what Up brought up.
type Upped struct {
	URL      string            // the daemon's MCP endpoint
	EnvPaths map[string]string // the agents' environment files, by agent
	Wrote    []string          // the files written
	Started  []string          // the agents whose panes were started
}

// Up brings the fleet of c.Store up: the members' work trees, the daemon
// (UpDaemon), the record,
// each agent's token and configuration (ConfigureAgents), and the panes
// (StartPanes). If it fails after it started the daemon, it stops that
// daemon again, and StartPanes kills the panes it started: a failed up
// leaves no process of its own behind. Tokens and files it wrote stay,
// and the next run uses them.
func Up(ctx context.Context, c UpConfig) (Upped, error) {
	rec, _ := ReadRecord(c.Store)
	var up Upped
	say := func(format string, args ...any) { fmt.Fprintf(c.Stderr, "fleetstate: up: "+format+"\n", args...) }
	if err := c.Roster.EnsureWorktrees(ctx, say); err != nil {
		return up, fmt.Errorf("up: %w", err)
	}
	url, launched, err := UpDaemon(ctx, c.Store, &rec, c.Bin, c.Addr, c.File, c.FileSum, c.Roster.ServeFlags(), c.Stderr)
	if err != nil {
		return up, err
	}
	up.URL = url
	if !launched {
		reloadBudgets(ctx, c.Store, url, c.Stderr)
	}
	rec.URL, rec.File, rec.Socket, rec.Session = url, c.File, c.Roster.TmuxSocket, c.Roster.TmuxSession
	if err = WriteRecord(c.Store, rec); err != nil {
		err = fmt.Errorf("up: %s: %v", c.Store.PrivatePath(RecordFile), err)
	}
	if err == nil {
		up.EnvPaths, up.Wrote, err = ConfigureAgents(c.Store, c.Tokens, c.Roster, c.Bin, url)
	}
	if err == nil {
		adviseClaude(c.Roster, c.Stderr)
	}
	if err == nil {
		up.Started, err = StartPanes(ctx, c.Roster, up.EnvPaths)
	}
	if err != nil && launched {
		if serr := StopDaemon(c.Store, rec, io.Discard, c.Stderr); serr != nil {
			return up, fmt.Errorf("%w\n(and the daemon up started could not be stopped: %v)", err, serr)
		}
		rec.PID = 0
		_ = WriteRecord(c.Store, rec)
		return up, fmt.Errorf("%w\n(up stopped the daemon it had started)", err)
	}
	return up, err
}

// reloadBudgets has the daemon at url, which up did not start this time,
// set the budgets its fleet file changed since it last read them; a
// failure is told, and changes nothing else up does.
func reloadBudgets(ctx context.Context, store *fleetstate.Store, url string, stderr io.Writer) {
	token, err := auth.OperatorToken(store)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var c *mcpadapter.Client
		if c, err = mcpadapter.Dial(ctx, url, token, "fleetstate up"); err == nil {
			err = c.Call(ctx, "fleet_budget", map[string]any{"reload": true}, nil)
			c.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "fleetstate: up: the fleet file's budgets did not reach the daemon: %v\n", err)
	}
}

// adviseClaude keeps the configuration up wrote for each Claude Code
// agent out of git (agentconf.KeepOutOfGit), and tells stderr what it
// cannot: a file git tracks, and a workdir Claude Code does not trust
// yet, whose first run waits on a question in the agent's pane.
func adviseClaude(ro *daemon.Roster, stderr io.Writer) {
	for _, a := range ro.Agents {
		if a.Program != daemon.ProgramClaude {
			continue
		}
		files := []string{filepath.Join(a.Workdir, ".mcp.json"), filepath.Join(a.Workdir, ".claude", "settings.json")}
		tracked, err := agentconf.KeepOutOfGit(a.Workdir, files)
		if err != nil {
			fmt.Fprintf(stderr, "fleetstate: up: %s: could not keep the agent configuration out of git: %v\n", a.Name, err)
		}
		for _, f := range tracked {
			fmt.Fprintf(stderr, "fleetstate: up: %s: git tracks %s, which now holds the fleet's MCP server and hooks: leave them out of your commits\n", a.Name, f)
		}
		if a.Command != nil && !agentconf.ClaudeTrusts(agentconf.ClaudeConfigPath(agentEnv(a)), a.Workdir) {
			fmt.Fprintf(stderr, "fleetstate: up: %s: Claude Code asks once whether to trust %s, and waits (the agent reads BLOCKED): answer it in %s's pane, or let up answer it with \"trust\": true in the fleet file\n", a.Name, agentconf.ProjectRoot(a.Workdir), a.Name)
		}
	}
}

// agentEnv returns the environment agent a runs with, as far as up's
// configuration depends on it: the fleet file's env over up's own.
func agentEnv(a daemon.RosterAgent) func(string) string {
	return func(k string) string {
		if v, ok := a.Env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
}

// UpDaemon returns the URL of the daemon that serves store's fleet: the
// one serving it already, or a new one that LaunchDaemon starts with
// flags on addr, else on the address of rec's last run, else on a free
// port, recorded in rec; launched reports the latter. What the user
// should know (a daemon that up did not start, a fleet file changed
// since the daemon read it) goes to stderr.
func UpDaemon(ctx context.Context, store *fleetstate.Store, rec *Record, bin, addr, file, fileSum string, flags []string, stderr io.Writer) (url string, launched bool, err error) {
	owner, owned, err := store.FleetOwner()
	if err != nil {
		return "", false, fmt.Errorf("up: %v", err)
	}
	switch {
	case owned && !strings.HasPrefix(owner.Addr, "http"):
		return "", false, fmt.Errorf("up: the fleet in %s is run by %s, which serves no HTTP: stop it, then run fleetstate up again", store.Dir(), owner)
	case owned:
		url = owner.Addr
		if owner.PID != rec.PID {
			fmt.Fprintf(stderr, "fleetstate: up: using the daemon already serving %s (%s); it was not started by up, so it knows this fleet's panes only if it was started with --roster %s\n", store.Dir(), owner, file)
		}
		if owner.PID == rec.PID && rec.FileSum != "" && rec.FileSum != fileSum {
			fmt.Fprintf(stderr, "fleetstate: up: %s changed since the daemon read it: agents and panes added or changed reach it after fleetstate down and up\n", file)
		}
		if addr != "" && !strings.Contains(url, "//"+addr+"/") {
			fmt.Fprintf(stderr, "fleetstate: up: --addr %s ignored: the fleet is served at %s already\n", addr, url)
		}
	default:
		want := addr
		if want == "" {
			want = addrOf(rec.URL)
		}
		pid, u, err := LaunchDaemon(ctx, store, bin, want, file, flags)
		if err != nil && addr == "" && want != "" {
			// The address of the last run is taken: any free port will do.
			fmt.Fprintf(stderr, "fleetstate: up: %s is taken; starting the daemon on a free port\n", want)
			pid, u, err = LaunchDaemon(ctx, store, bin, "", file, flags)
		}
		if err != nil {
			return "", false, err
		}
		url, launched = u, true
		rec.PID, rec.FileSum = pid, fileSum
	}
	return url, launched, nil
}

// ConfigureAgents gives each agent of ro its token (the one its
// environment file holds, while that is still the agent's), its
// environment file and its program's configuration, which runs bin and
// reaches the daemon at url. It returns the environment files by agent
// and the files it changed.
func ConfigureAgents(store *fleetstate.Store, tokens *auth.Tokens, ro *daemon.Roster, bin, url string) (envPaths map[string]string, wrote []string, err error) {
	envPaths = map[string]string{}
	for i, a := range ro.Agents {
		role, _ := mcpadapter.ParseRole(a.Role)
		envPath := store.PrivatePath("agents/" + a.Name + "/env")
		envPaths[a.Name] = envPath
		old := agentconf.ReadEnvFile(envPath)
		token := old["FLEET_TOKEN"]
		if id, ok := tokens.Lookup(token); !ok || id != (mcpadapter.Identity{Agent: a.Name, Role: role}) {
			if token, err = tokens.Add(a.Name, role); err != nil {
				return nil, nil, fmt.Errorf("up: agents[%d] (%s): token: %v; see fleetstate token list --dir %s", i, a.Name, err, store.Dir())
			}
		}
		env := map[string]string{}
		for k, v := range a.Env {
			env[k] = v
		}
		env["FLEET_AGENT"], env["FLEET_ROLE"], env["FLEET_TOKEN"], env["FLEET_URL"] = a.Name, string(role), token, url
		var files []string
		switch a.Program {
		case daemon.ProgramClaude:
			files, err = agentconf.WriteClaudeConfig(a.Workdir, agentconf.Config{Bin: bin, PermissionWait: ro.PermissionWait()})
			if err == nil && a.Command != nil && ro.Trusted(a) {
				config := agentconf.ClaudeConfigPath(agentEnv(a))
				var w bool
				if w, err = agentconf.TrustClaude(config, a.Workdir); w {
					files = append(files, config)
				}
			}
		case daemon.ProgramCodex:
			home := store.PrivatePath("agents/" + a.Name + "/codex")
			env["CODEX_HOME"] = home
			c := agentconf.Config{Bin: bin, URL: url, PermissionWait: ro.PermissionWait()}
			if a.Command != nil && ro.Trusted(a) {
				c.Trust = agentconf.ProjectRoot(a.Workdir)
			}
			files, err = agentconf.WriteCodexConfig(home, c)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("up: agents[%d] (%s): %v", i, a.Name, err)
		}
		wrote = append(wrote, files...)
		if w, err := agentconf.WriteIfChanged(envPath, agentconf.EnvFile(env), true); err != nil {
			return nil, nil, fmt.Errorf("up: agents[%d] (%s): %v", i, a.Name, err)
		} else if w {
			wrote = append(wrote, envPath)
		}
	}
	return envPaths, wrote, nil
}

// StopDaemon stops the daemon that serves store's fleet if up started it
// (rec.PID), and says what it did on stdout (and on stderr, a daemon that
// gave the fleet up but did not exit in time).
func StopDaemon(store *fleetstate.Store, rec Record, stdout, stderr io.Writer) error {
	owner, owned, err := store.FleetOwner()
	switch {
	case err != nil:
		return fmt.Errorf("down: %v", err)
	case !owned:
		fmt.Fprintln(stdout, "no daemon serves the fleet")
	case owner.PID != rec.PID || rec.PID == 0:
		fmt.Fprintf(stdout, "left running: the daemon %s was not started by fleetstate up\n", owner)
	default:
		gone := func(int) bool {
			o, owned, _ := store.FleetOwner()
			return owned && o.PID == owner.PID
		}
		if StopAll([]int{owner.PID}, gone) == 0 || gone(0) {
			return fmt.Errorf("down: the daemon (pid %d) did not stop, even on SIGKILL", owner.PID)
		}
		// The daemon gives the fleet up first, then closes its
		// connections and exits. Wait for the exit too, without another
		// signal: once the process is gone its pid may be another's.
		if !WaitFor(StopWait, func() bool { return !Alive(owner.PID) }) {
			fmt.Fprintf(stderr, "fleetstate: down: the daemon (pid %d) gave the fleet up but had not exited after %v\n", owner.PID, StopWait)
		}
		fmt.Fprintf(stdout, "stopped the daemon (pid %d)\n", owner.PID)
	}
	return nil
}

// addrOf returns the host:port of a daemon URL, or "".
func addrOf(url string) string {
	s := strings.TrimPrefix(url, "http://")
	if s == url {
		return ""
	}
	host, _, _ := strings.Cut(s, "/")
	return host
}
