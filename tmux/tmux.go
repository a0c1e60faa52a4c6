// Package tmux reaches member agents that run in tmux panes: it delivers
// prompts into a pane, reads the pane's tail, and tells the pane's status,
// as a [fleetstate.Member] port.
//
// All commands go to one tmux server on a private socket, so nothing here
// touches a user's own tmux sessions.
package tmux

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
)

// Server is a tmux server reached through a private socket.
type Server struct {
	socket string
}

// NewServer returns the tmux server whose socket is at path. The server
// itself starts with the first session created on it.
func NewServer(socket string) *Server { return &Server{socket: socket} }

// Socket returns the path of the server's socket.
func (s *Server) Socket() string { return s.socket }

// Run runs a tmux command on the server, with stdin as its standard input,
// and returns its standard output. Every argument reaches the command as
// it is: one ending in ";", which tmux would read as the end of the
// command, is escaped (see [Literal]).
func (s *Server) Run(ctx context.Context, stdin string, args ...string) (string, error) {
	return s.RunAll(ctx, stdin, args)
}

// RunAll runs several tmux commands on the server in one invocation, one
// after the other, as tmux runs "cmd1 ; cmd2", and returns the output of
// all of them. A setting made by one command (such as remain-on-exit)
// thus holds before the next one starts a pane. Arguments are taken as
// they are, as in [Server.Run].
func (s *Server) RunAll(ctx context.Context, stdin string, cmds ...[]string) (string, error) {
	if len(cmds) == 0 || len(cmds[0]) == 0 {
		return "", errors.New("tmux: no command")
	}
	// -u: the client takes its output as UTF-8 whatever the locale, so
	// that tmux does not replace a name's non-ASCII bytes (and tabs) by
	// "_" in what it prints.
	args := []string{"-u", "-S", s.socket}
	for i, c := range cmds {
		if i > 0 {
			args = append(args, ";")
		}
		for _, a := range c {
			args = append(args, Literal(a))
		}
	}
	cmd := exec.CommandContext(ctx, "tmux", args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		name := cmds[0][0]
		if ctx.Err() != nil {
			return "", fmt.Errorf("tmux %s: %w", name, ctx.Err())
		}
		if gone(msg) {
			return "", fmt.Errorf("tmux %s: %s: %w", name, msg, fleetstate.ErrMemberGone)
		}
		return "", fmt.Errorf("tmux %s: %v: %s", name, err, msg)
	}
	return out.String(), nil
}

// Literal returns arg as tmux must be given it on its command line to
// take it as it is. tmux reads an argument that ends in ";" as that text
// without the ";" followed by the end of the command, unless the ";" is
// escaped as "\;": an agent named "a;" would otherwise end the command
// that names it, and what follows would run as a command of its own.
func Literal(arg string) string {
	if strings.HasSuffix(arg, ";") {
		return arg[:len(arg)-1] + `\;`
	}
	return arg
}

// Format returns s escaped for an argument that tmux expands as a format
// (a window name, a start directory): "#" doubled, so that a name such as
// "#{pane_pid}" is shown as it is rather than expanded.
func Format(s string) string { return strings.ReplaceAll(s, "#", "##") }

// gone reports whether a tmux error means the pane (or the server with
// all its panes) no longer exists.
func gone(msg string) bool {
	for _, s := range []string{"can't find pane", "can't find window", "can't find session", "no server running", "error connecting to", "server exited unexpectedly"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Kill stops the server and every pane on it.
func (s *Server) Kill(ctx context.Context) error {
	_, err := s.Run(ctx, "", "kill-server")
	if errors.Is(err, fleetstate.ErrMemberGone) {
		return nil
	}
	return err
}

// AgentOption is the tmux user option, set on a pane, that names the
// fleet agent whose pane it is. fleetstate up sets it on every pane it
// starts, and the daemon finds an agent's pane by it, then addresses the
// pane by its ID ("%N"). An agent's name is never used as a tmux target:
// tmux would read "1" as a window index, "bob.0" as bob's first pane and
// "#{pane_pid}" as a format, and the name would reach another pane.
const AgentOption = "@fleet_agent"

// SessionPane is a pane of a session, as [Server.SessionPanes] lists it.
type SessionPane struct {
	ID     string // the pane's ID, "%N"
	Agent  string // the pane's AgentOption; "" when it has none
	Window string // the name of the pane's window
	PID    int    // the pid of the pane's command
	Dead   bool   // the command ended and the pane remains
}

// SessionPanes lists the panes of session, in tmux's order; exists is
// false when there is no such session, or no server.
func (s *Server) SessionPanes(ctx context.Context, session string) (panes []SessionPane, exists bool, err error) {
	// Agent names hold no control characters (fleetstate.ValidateAgentName),
	// and window names are the last field: tabs separate the fields.
	out, err := s.Run(ctx, "", "list-panes", "-s", "-t", "="+session, "-F",
		"#{pane_id}\t#{pane_pid}\t#{pane_dead}\t#{"+AgentOption+"}\t#{window_name}")
	if errors.Is(err, fleetstate.ErrMemberGone) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		f := strings.SplitN(line, "\t", 5)
		if len(f) != 5 || !strings.HasPrefix(f[0], "%") {
			continue
		}
		pid, _ := strconv.Atoi(f[1])
		panes = append(panes, SessionPane{ID: f[0], PID: pid, Dead: f[2] == "1", Agent: f[3], Window: f[4]})
	}
	return panes, true, nil
}

// AgentPane returns the ID of the pane of session whose [AgentOption] is
// agent; [fleetstate.ErrMemberGone] when there is none.
func (s *Server) AgentPane(ctx context.Context, session, agent string) (string, error) {
	panes, _, err := s.SessionPanes(ctx, session)
	if err != nil {
		return "", err
	}
	for _, p := range panes {
		if p.Agent == agent {
			return p.ID, nil
		}
	}
	return "", fmt.Errorf("tmux: no pane of agent %q in session %s: %w", agent, session, fleetstate.ErrMemberGone)
}

// TagAgent sets the [AgentOption] of the pane id ("%N") to agent.
func (s *Server) TagAgent(ctx context.Context, id, agent string) error {
	_, err := s.Run(ctx, "", "set-option", "-p", "-t", id, "--", AgentOption, agent)
	return err
}

// Patterns recognise a status from what a pane shows, for agent programs
// that report no status through hooks. Each is a regular expression
// matched against the last lines of the screen; Blocked is tried first,
// then Working, then Idle. A screen none matches is UNKNOWN.
type Patterns struct {
	Working []string `json:"working"`
	Blocked []string `json:"blocked"`
	Idle    []string `json:"idle"`
}

type compiled struct{ working, blocked, idle []*regexp.Regexp }

func (p *Patterns) compile() (*compiled, error) {
	if p == nil {
		return nil, nil
	}
	c := &compiled{}
	for _, set := range []struct {
		src []string
		dst *[]*regexp.Regexp
	}{{p.Working, &c.working}, {p.Blocked, &c.blocked}, {p.Idle, &c.idle}} {
		for _, s := range set.src {
			re, err := regexp.Compile("(?m)" + s)
			if err != nil {
				return nil, fmt.Errorf("tmux: pattern %q: %w", s, err)
			}
			*set.dst = append(*set.dst, re)
		}
	}
	return c, nil
}

func (c *compiled) classify(screen string) fleetstate.Status {
	if c == nil {
		return fleetstate.StatusUnknown
	}
	for _, set := range []struct {
		res []*regexp.Regexp
		st  fleetstate.Status
	}{{c.blocked, fleetstate.StatusBlocked}, {c.working, fleetstate.StatusWorking}, {c.idle, fleetstate.StatusIdle}} {
		for _, re := range set.res {
			if re.MatchString(screen) {
				return set.st
			}
		}
	}
	return fleetstate.StatusUnknown
}

// Classify returns the status that patterns read off screen, the text of
// a pane's screen, as a [Pane] with these patterns reads it: UNKNOWN when
// none matches. It is how a program's patterns are checked against
// screens captured from the program.
func (p *Patterns) Classify(screen string) (fleetstate.Status, error) {
	c, err := p.compile()
	if err != nil {
		return fleetstate.StatusUnknown, err
	}
	return c.classify(lastLines(screen, defaultScreenLines)), nil
}

// maxQuestion bounds the question a [Pane] shows of a BLOCKED screen.
const maxQuestion = 1024

// question returns what a screen that reads BLOCKED asks: its last lines
// with the blank ones and the rules of box drawing left out, at most
// maxQuestion bytes of them, from the end.
func question(screen string) string {
	var keep []string
	for _, l := range strings.Split(screen, "\n") {
		l = strings.TrimSpace(l)
		if strings.Trim(l, "─━═│┃╭╮╯╰┌┐└┘├┤ ") != "" {
			keep = append(keep, l)
		}
	}
	q := strings.Join(keep, "\n")
	if len(q) > maxQuestion {
		q = q[len(q)-maxQuestion:]
		q = q[strings.IndexByte(q, '\n')+1:] // whole lines only
	}
	return q
}

// PaneOptions configure a [Pane]. A nil *PaneOptions means the defaults.
type PaneOptions struct {
	// ClearKeys are sent before a delivery to clear a draft the user or
	// the agent left in the input line. Nil means C-e then C-u (end of
	// line, kill to its start); an empty non-nil slice sends nothing.
	ClearKeys []string
	// Patterns read the status off the screen while no hook has reported
	// one. Nil means no patterns: without hooks the status is UNKNOWN.
	Patterns *Patterns
	// ScreenLines is how many lines at the bottom of the screen the
	// patterns look at. Zero means 15.
	ScreenLines int
	// HookSettle is how long a hook's report of WORKING or BLOCKED stands
	// against a screen that reads IDLE: the screen lags the hooks for a
	// moment when a turn starts, and a turn a person interrupts (Esc)
	// ends without the Stop hook, after which the idle screen is the
	// truth. Zero means 2 s.
	HookSettle time.Duration
	// InterruptCommands are typed into the pane, each followed by Enter,
	// after the Escape that interrupts the agent (see [Pane.Interrupt]):
	// Codex's "/stop", which ends the commands Codex leaves running in
	// the background of an interrupted turn.
	InterruptCommands []string
}

// defaultScreenLines is the ScreenLines of a zero PaneOptions.
const defaultScreenLines = 15

// Pane is a member agent's tmux pane. It implements [fleetstate.Member]:
// Deliver pastes a prompt as one block and submits it once; Tail reads the
// lines printed since the last delivery; Status comes from the agent's
// hooks when it reports them ([Pane.Report]) and from screen patterns
// otherwise, except that a screen the Blocked patterns match (a question
// of the program's own, such as a permission prompt) reads BLOCKED
// whatever the hooks said, with its question ([Pane.Question]), and a
// screen the Idle patterns match reads IDLE once the hooks' last report
// is [PaneOptions].HookSettle old (a turn a person interrupts ends
// without the Stop hook). A pane
// that no longer exists is [fleetstate.ErrMemberGone].
//
// A Pane is safe for concurrent use.
type Pane struct {
	srv     *Server
	target  string
	session string // with agent: the session the agent's pane is found in
	agent   string // the AgentOption the pane is found by; "" for a target
	clear   []string
	pats    *compiled
	screen  int
	settle  time.Duration
	// interrupt are the commands typed after Escape by Interrupt.
	interrupt []string

	mu        sync.Mutex
	paneID    string            // guarded by mu; the pane target resolves to ("%N"), once known
	turnStart int               // guarded by mu; absolute line where the last delivery began, -1 before any
	hook      fleetstate.Status // guarded by mu
	hooked    bool              // guarded by mu; a hook has reported
	hookedAt  time.Time         // guarded by mu; when
	question  string            // guarded by mu; what the screen asked at the last status read
}

// defaultHookSettle is the HookSettle of a zero PaneOptions.
const defaultHookSettle = 2 * time.Second

// NewPane returns the pane target (a tmux target such as "fleet:0.1" or a
// pane ID such as "%3") on srv.
func NewPane(srv *Server, target string, opts *PaneOptions) (*Pane, error) {
	if opts == nil {
		opts = &PaneOptions{}
	}
	pats, err := opts.Patterns.compile()
	if err != nil {
		return nil, err
	}
	p := &Pane{srv: srv, target: target, clear: opts.ClearKeys, pats: pats, screen: opts.ScreenLines, settle: opts.HookSettle, interrupt: opts.InterruptCommands, turnStart: -1}
	if p.clear == nil {
		p.clear = []string{"C-e", "C-u"}
	}
	if p.screen <= 0 {
		p.screen = defaultScreenLines
	}
	if p.settle <= 0 {
		p.settle = defaultHookSettle
	}
	return p, nil
}

// NewAgentPane returns the pane of session on srv that belongs to agent:
// the pane whose [AgentOption] is agent, found again whenever the pane it
// was is gone (the agent may have been restarted in a new pane), and
// always addressed by its ID.
func NewAgentPane(srv *Server, session, agent string, opts *PaneOptions) (*Pane, error) {
	p, err := NewPane(srv, "", opts)
	if err != nil {
		return nil, err
	}
	p.session, p.agent = session, agent
	return p, nil
}

// Target returns the pane's tmux target, or "" for a pane found by its
// agent ([NewAgentPane]).
func (p *Pane) Target() string { return p.target }

// String describes the pane for error messages.
func (p *Pane) String() string {
	if p.agent != "" {
		return fmt.Sprintf("of agent %q in session %s", p.agent, p.session)
	}
	return p.target
}

// fixed reports whether the pane is named by its ID, and so is that pane
// only.
func (p *Pane) fixed() bool { return p.agent == "" && strings.HasPrefix(p.target, "%") }

// Report records a status the agent reported through its hooks. From then
// on hooks are the pane's status source; screen patterns are no longer
// read.
func (p *Pane) Report(st fleetstate.Status) {
	p.mu.Lock()
	p.hook, p.hooked, p.hookedAt = st, true, time.Now()
	p.mu.Unlock()
}

// paneInfo is what tmux says of the pane's geometry and life.
type paneInfo struct {
	id       string // the pane's ID, "%N"
	dead     bool
	history  int // lines in the scrollback above the screen
	cursorY  int // cursor row on the screen
	absolute int // history + cursorY: the cursor's line counted from the top of the scrollback
}

// resolve returns the ID of the pane: for an agent's pane, the one whose
// AgentOption names the agent; else the one the target names. tmux falls
// back to some other pane when a target such as "fleet:dora.0" names
// nothing, so the target is matched exactly against the list of panes,
// once; after that the pane is addressed by its ID, which tmux never
// reuses while the server runs. If that pane is gone, it is looked for
// again (the agent may have been restarted in a new pane).
func (p *Pane) resolve(ctx context.Context) (string, error) {
	p.mu.Lock()
	id := p.paneID
	p.mu.Unlock()
	if id == "" && p.fixed() {
		id = p.target
	}
	if id != "" {
		return id, nil
	}
	if p.agent != "" {
		id, err := p.srv.AgentPane(ctx, p.session, p.agent)
		if err != nil {
			return "", err
		}
		p.mu.Lock()
		p.paneID = id
		p.mu.Unlock()
		return id, nil
	}
	out, err := p.srv.Run(ctx, "", "list-panes", "-a", "-F",
		"#{pane_id}\t#{session_name}:#{window_name}.#{pane_index}\t#{session_name}:#{window_index}.#{pane_index}\t#{session_name}:#{window_name}\t#{session_name}:#{window_index}")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		for _, name := range f[min(1, len(f)):] {
			if name == p.target && id == "" {
				id = f[0]
			}
		}
	}
	if id == "" {
		return "", fmt.Errorf("tmux: no pane %s: %w", p.target, fleetstate.ErrMemberGone)
	}
	p.mu.Lock()
	p.paneID = id
	p.mu.Unlock()
	return id, nil
}

// info reads the pane's state. It lists the panes of the pane's window
// rather than asking display-message, which answers for some other pane
// when its target does not exist.
func (p *Pane) info(ctx context.Context) (paneInfo, error) {
	id, err := p.resolve(ctx)
	if err != nil {
		return paneInfo{}, err
	}
	out, err := p.srv.Run(ctx, "", "list-panes", "-t", id, "-F", "#{pane_id} #{pane_dead} #{history_size} #{cursor_y}")
	if errors.Is(err, fleetstate.ErrMemberGone) && !p.fixed() {
		// The pane is gone; the agent may live on in a new pane under
		// the same target. Forget the ID, so the next read resolves it.
		p.mu.Lock()
		if p.paneID == id {
			p.paneID = ""
		}
		p.mu.Unlock()
	}
	if err != nil {
		return paneInfo{}, err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != id {
			continue
		}
		hs, err1 := strconv.Atoi(f[2])
		cy, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			break
		}
		in := paneInfo{id: id, dead: f[1] == "1", history: hs, cursorY: cy, absolute: hs + cy}
		if in.dead {
			return in, fmt.Errorf("tmux: pane %s is dead: %w", p, fleetstate.ErrMemberGone)
		}
		return in, nil
	}
	return paneInfo{}, fmt.Errorf("tmux: unexpected pane list %q", out)
}

// Deliver implements [fleetstate.Member]. It clears any draft in the input
// line, pastes content as one block (bracketed, where the program asked
// for bracketed paste, so that its newlines do not submit it line by line)
// and then submits it with a single Enter. That the agent took it is
// confirmed by its WORKING status, which the rendezvous waits for, not by
// these commands returning.
func (p *Pane) Deliver(ctx context.Context, content string) error {
	in, err := p.info(ctx)
	if err != nil {
		return err
	}
	if len(p.clear) > 0 {
		if _, err := p.srv.Run(ctx, "", append([]string{"send-keys", "-t", in.id}, p.clear...)...); err != nil {
			return err
		}
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	buf := "fleetstate-" + hex.EncodeToString(id[:])
	if _, err := p.srv.Run(ctx, content, "load-buffer", "-b", buf, "-"); err != nil {
		return err
	}
	if _, err := p.srv.Run(ctx, "", "paste-buffer", "-b", buf, "-t", in.id, "-p", "-d"); err != nil {
		_, _ = p.srv.Run(context.WithoutCancel(ctx), "", "delete-buffer", "-b", buf)
		return err
	}
	p.mu.Lock()
	p.turnStart = in.absolute
	p.mu.Unlock()
	_, err = p.srv.Run(ctx, "", "send-keys", "-t", in.id, "Enter")
	return err
}

// Status implements [fleetstate.Member].
func (p *Pane) Status(ctx context.Context) (fleetstate.Status, error) {
	in, err := p.info(ctx)
	if err != nil {
		return fleetstate.StatusUnknown, err
	}
	p.mu.Lock()
	hook, hooked, since := p.hook, p.hooked, time.Since(p.hookedAt)
	p.mu.Unlock()
	st, q := hook, ""
	if p.pats != nil {
		screen, err := p.srv.Run(ctx, "", "capture-pane", "-p", "-J", "-t", in.id)
		if err != nil {
			return fleetstate.StatusUnknown, err
		}
		screen = lastLines(screen, p.screen)
		switch seen := p.pats.classify(screen); {
		case seen == fleetstate.StatusBlocked:
			st, q = seen, question(screen)
		case !hooked || seen == fleetstate.StatusIdle && since >= p.settle:
			st = seen
		case st == fleetstate.StatusBlocked:
			// The hooks said the program asks (a permission prompt) and
			// its screen is not one the patterns know: still a question.
			q = question(screen)
		}
	} else if !hooked {
		st = fleetstate.StatusUnknown
	}
	p.mu.Lock()
	p.question = q
	p.mu.Unlock()
	return st, nil
}

// Question implements [fleetstate.Questioner]: what the screen asked at
// the last read of the status that read BLOCKED from the screen, such as
// "Do you want to proceed?" with its choices; "" otherwise.
func (p *Pane) Question() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.question
}

// Interrupt implements [fleetstate.Interrupter]: it presses Escape in the
// pane, which stops the work of Claude Code and Codex; then, once the
// screen reads idle (for a few seconds at most), it types each of the
// pane's [PaneOptions].InterruptCommands, as a person stopping what the
// agent left running would.
func (p *Pane) Interrupt(ctx context.Context) error {
	in, err := p.info(ctx)
	if err != nil {
		return err
	}
	if _, err = p.srv.Run(ctx, "", "send-keys", "-t", in.id, "Escape"); err != nil || len(p.interrupt) == 0 {
		return err
	}
	deadline := time.Now().Add(interruptWait)
	for p.pats != nil && time.Now().Before(deadline) && ctx.Err() == nil {
		screen, err := p.srv.Run(ctx, "", "capture-pane", "-p", "-J", "-t", in.id)
		if err != nil {
			return err
		}
		if p.pats.classify(lastLines(screen, p.screen)) == fleetstate.StatusIdle {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range p.interrupt {
		if _, err := p.srv.Run(ctx, "", "send-keys", "-t", in.id, "-l", "--", c); err != nil {
			return err
		}
		// Keys that follow typed text at once are taken for part of a
		// paste (Codex reads its Enter as a newline of the text).
		// A loaded machine stretches the burst: while the command still
		// stands in the input line, Enter again, a bounded number of times.
		for range 3 {
			time.Sleep(typedEnterPause)
			if _, err := p.srv.Run(ctx, "", "send-keys", "-t", in.id, "Enter"); err != nil {
				return err
			}
			time.Sleep(typedEnterPause)
			screen, err := p.srv.Run(ctx, "", "capture-pane", "-p", "-J", "-t", in.id)
			if err != nil || !strings.Contains(lastLines(screen, p.screen), "› "+c) {
				break
			}
		}
	}
	return nil
}

// interruptWait bounds the wait of Interrupt for the screen to read idle
// after Escape, and typedEnterPause is the pause between a command it
// types and the Enter that submits it.
const (
	interruptWait   = 5 * time.Second
	typedEnterPause = 500 * time.Millisecond
)

// Tail implements [fleetstate.Member]: the lines from the last delivery's
// prompt to the cursor, wrapped lines joined, at most lines of them;
// clipped reports that there were more. A program that draws its whole
// screen, as Claude Code and Codex do, keeps its input line where it was
// at the delivery and redraws what it says above it: when the cursor is
// not below the delivery's line, the tail is the visible screen down to
// the cursor.
func (p *Pane) Tail(ctx context.Context, lines int) (string, bool, error) {
	in, err := p.info(ctx)
	if err != nil {
		return "", false, err
	}
	p.mu.Lock()
	start := p.turnStart
	p.mu.Unlock()
	if start < 0 || start >= in.absolute {
		start = in.history // no delivery known, or a screen drawn in place
	}
	clipped := in.absolute-start+1 > lines
	from := max(start, in.absolute-lines+1)
	out, err := p.srv.Run(ctx, "", "capture-pane", "-p", "-J", "-t", in.id,
		"-S", strconv.Itoa(from-in.history), "-E", strconv.Itoa(in.cursorY))
	if err != nil {
		return "", false, err
	}
	return strings.TrimRight(out, "\n "), clipped, nil
}

// lastLines returns the last n non-empty-trailing lines of s.
func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n "), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
