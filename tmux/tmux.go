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
// and returns its standard output.
func (s *Server) Run(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", s.socket}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if ctx.Err() != nil {
			return "", fmt.Errorf("tmux %s: %w", args[0], ctx.Err())
		}
		if gone(msg) {
			return "", fmt.Errorf("tmux %s: %s: %w", args[0], msg, fleetstate.ErrMemberGone)
		}
		return "", fmt.Errorf("tmux %s: %v: %s", args[0], err, msg)
	}
	return out.String(), nil
}

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
}

// Pane is a member agent's tmux pane. It implements [fleetstate.Member]:
// Deliver pastes a prompt as one block and submits it once; Tail reads the
// lines printed since the last delivery; Status comes from the agent's
// hooks when it reports them ([Pane.Report]) and from screen patterns
// otherwise. A pane that no longer exists is [fleetstate.ErrMemberGone].
//
// A Pane is safe for concurrent use.
type Pane struct {
	srv    *Server
	target string
	clear  []string
	pats   *compiled
	screen int

	mu        sync.Mutex
	paneID    string            // guarded by mu; the pane target resolves to ("%N"), once known
	turnStart int               // guarded by mu; absolute line where the last delivery began, -1 before any
	hook      fleetstate.Status // guarded by mu
	hooked    bool              // guarded by mu; a hook has reported
}

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
	p := &Pane{srv: srv, target: target, clear: opts.ClearKeys, pats: pats, screen: opts.ScreenLines, turnStart: -1}
	if p.clear == nil {
		p.clear = []string{"C-e", "C-u"}
	}
	if p.screen <= 0 {
		p.screen = 15
	}
	return p, nil
}

// Target returns the pane's tmux target.
func (p *Pane) Target() string { return p.target }

// Report records a status the agent reported through its hooks. From then
// on hooks are the pane's status source; screen patterns are no longer
// read.
func (p *Pane) Report(st fleetstate.Status) {
	p.mu.Lock()
	p.hook, p.hooked = st, true
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

// resolve returns the ID of the pane the target names. tmux falls back to
// some other pane when a target such as "fleet:dora.0" names nothing, so
// the target is matched exactly against the list of panes, once; after
// that the pane is addressed by its ID, which tmux never reuses while the
// server runs. If that pane is gone, the target is resolved again (the
// agent may have been restarted in a new pane).
func (p *Pane) resolve(ctx context.Context) (string, error) {
	p.mu.Lock()
	id := p.paneID
	p.mu.Unlock()
	if id == "" && strings.HasPrefix(p.target, "%") {
		id = p.target
	}
	if id != "" {
		return id, nil
	}
	out, err := p.srv.Run(ctx, "", "list-panes", "-a", "-F",
		"#{pane_id} #{session_name}:#{window_name}.#{pane_index} #{session_name}:#{window_index}.#{pane_index} #{session_name}:#{window_name} #{session_name}:#{window_index}")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
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
	if errors.Is(err, fleetstate.ErrMemberGone) && !strings.HasPrefix(p.target, "%") {
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
			return in, fmt.Errorf("tmux: pane %s is dead: %w", p.target, fleetstate.ErrMemberGone)
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
	hook, hooked := p.hook, p.hooked
	p.mu.Unlock()
	if hooked {
		return hook, nil
	}
	if p.pats == nil {
		return fleetstate.StatusUnknown, nil
	}
	screen, err := p.srv.Run(ctx, "", "capture-pane", "-p", "-J", "-t", in.id)
	if err != nil {
		return fleetstate.StatusUnknown, err
	}
	return p.pats.classify(lastLines(screen, p.screen)), nil
}

// Tail implements [fleetstate.Member]: the lines from the last delivery's
// prompt to the cursor, wrapped lines joined, at most lines of them;
// clipped reports that there were more.
func (p *Pane) Tail(ctx context.Context, lines int) (string, bool, error) {
	in, err := p.info(ctx)
	if err != nil {
		return "", false, err
	}
	p.mu.Lock()
	start := p.turnStart
	p.mu.Unlock()
	if start < 0 || start > in.absolute {
		start = in.history // no delivery known: the visible screen
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
