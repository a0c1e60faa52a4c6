package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/modelserver"
	"github.com/fleetstate/fleetstate/internal/fleettest/realagent"
	"github.com/fleetstate/fleetstate/internal/fleetup"
	"github.com/fleetstate/fleetstate/internal/leadcli"
	"github.com/fleetstate/fleetstate/internal/worktree"
	"github.com/fleetstate/fleetstate/tmux"
)

// The tests in this file run the README's fleet for real: Claude Code and
// Codex at the versions realagent pins, installed from npm, the members
// in the git work trees up makes, brought up by fleetstate up in tmux
// panes with nobody at them, and answered by a scripted model server on
// 127.0.0.1 (package modelserver: each brief carries the script its
// member's model follows).

// update makes TestRealFleet write the screens the real CLIs show into
// internal/agent/testdata/screens, whose test holds the screen patterns
// to them: go test ./cmd/fleetstate -run TestRealFleet -update.
var update = flag.Bool("update", false, "write the real CLIs' screens into internal/agent/testdata/screens")

// programOf names the CLI each member of the README's fleet runs.
var programOf = map[string]string{"alice": "claude", "bob": "codex"}

// realWait bounds each wait for a real agent: a model turn of the scripted
// server takes a second or two, a CLI's start three to five.
const realWait = 90 * time.Second

// realFleet is the README's fleet, up.
type realFleet struct {
	t      *testing.T
	model  *modelserver.Server
	env    []string // the person's environment: HOME, PATH with the CLIs, the model server's
	home   string
	repo   string // the lead's checkout; up makes alice's and bob's work trees
	file   string // the fleet file, in repo
	dir    string // the state directory
	socket string
}

// readmeFleet returns the fleet file of the README's "A fleet, end to
// end", as written there.
// modelOf is the model each member's CLI asks the model server for, by
// default, and realPrices prices them, per million tokens.
var (
	modelOf    = map[string]string{"alice": "claude-opus-5-5", "bob": realagent.CodexModel}
	realPrices = map[string]fleetstate.Price{
		"claude-opus-5-5":    {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
		realagent.CodexModel: {Input: 1.25, Output: 10, CacheRead: 0.125},
	}
)

func readmeFleet(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "## A fleet, end to end")
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(rest)
	if !ok || m == nil {
		t.Fatal("README.md: no fleet file under \"A fleet, end to end\"")
	}
	var fleet map[string]any
	if err := json.Unmarshal([]byte(m[1]), &fleet); err != nil {
		t.Fatalf("README.md's fleet file: %v", err)
	}
	return fleet
}

// newRealFleet brings the README's fleet up with extra merged into its
// fleet file (test-only settings: the tmux socket, shorter bounds). The
// test's cleanup brings it down and checks that nothing of it is left.
func newRealFleet(t *testing.T, extra map[string]any) *realFleet {
	t.Helper()
	fleettest.NeedCommand(t, fleettest.RequireTmux, "tmux", "the agents run in tmux panes")
	claude, codex := realagent.Install(t)
	model := modelserver.Start(t, nil)
	base := t.TempDir()
	f := &realFleet{t: t, model: model, home: filepath.Join(base, "home"), repo: filepath.Join(base, "proj"),
		dir: filepath.Join(base, "proj", ".ai-fleet-state"), socket: fleettest.TmuxSocket(t)}
	f.file = filepath.Join(f.repo, "fleet.json")

	// The person: a home where both CLIs were used before, pointed at the
	// model server, with git's user in ~/.gitconfig (the members' commits
	// and the lead's merges need one), and the CLIs and fleetstate on the
	// PATH. git's settings come from that home alone.
	env := realagent.ClaudeHome(t, f.home, model.URL(), "sk-ant-test-fleetstate-e2e-0123456789")
	env = append(env, realagent.CodexHome(t, f.home, model.URL(), "")...)
	if err := os.WriteFile(filepath.Join(f.home, ".gitconfig"), []byte("[user]\n\tname = You\n\temail = you@example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Dir(claude) + string(os.PathListSeparator) + filepath.Dir(codex) + string(os.PathListSeparator) +
		filepath.Dir(binary) + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, kv := range realagent.Env(env...) {
		if !strings.HasPrefix(kv, "FLEET_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "TMUX") && !strings.HasPrefix(kv, "GIT_") {
			f.env = append(f.env, kv)
		}
	}
	f.env = append(f.env, "PATH="+path, "GIT_CONFIG_NOSYSTEM=1")

	// The lead's repository, with one commit; up makes the members' work
	// trees from it.
	if err := os.MkdirAll(f.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	f.git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(f.repo, "README"), []byte("the project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.git("add", "README")
	f.git("commit", "-q", "-m", "init")

	fleet := readmeFleet(t)
	fleet["tmux_socket"] = f.socket
	for k, v := range extra {
		fleet[k] = v
	}
	data, _ := json.MarshalIndent(fleet, "", "  ")
	if err := os.WriteFile(f.file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.down)
	out, says := f.runErr("up", f.file, "--dir", f.dir)
	t.Logf("up:\n%s%s", out, says)
	for m := range programOf {
		if want := m + ": made a work tree at " + f.tree(m) + " on branch " + m; !strings.Contains(says, want) {
			t.Fatalf("up said:\n%s\nwant %q", says, want)
		}
	}
	return f
}

// tree returns the work tree up made for member.
func (f *realFleet) tree(member string) string {
	return filepath.Join(f.dir, ".fleetstate", "worktrees", member)
}

// git runs git in the lead's repository as the person, and returns its
// output, trimmed.
func (f *realFleet) git(args ...string) string {
	f.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = f.repo, f.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// try runs the fleetstate binary as the person, in the lead's checkout,
// bounded by realWait.
func (f *realFleet) try(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), realWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env, cmd.Dir = f.env, f.repo
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// run runs the fleetstate binary as the person and fails the test unless
// it exits 0.
func (f *realFleet) run(args ...string) string {
	f.t.Helper()
	out, _ := f.runErr(args...)
	return out
}

// runErr is run that returns the standard error too.
func (f *realFleet) runErr(args ...string) (stdout, stderr string) {
	f.t.Helper()
	out, errOut, err := f.try(args...)
	if err != nil {
		f.t.Fatalf("fleetstate %s: %v\nstdout: %s\nstderr: %s\n%s", strings.Join(args, " "), err, out, errOut, f.screens())
	}
	return out, errOut
}

// cli runs a command of the lead CLI as the operator, with --dir.
func (f *realFleet) cli(args ...string) string {
	f.t.Helper()
	return f.run(append(args, "--dir", f.dir)...)
}

// cliJSON runs a command of the lead CLI with --json and decodes it.
func (f *realFleet) cliJSON(v any, args ...string) {
	f.t.Helper()
	jsonDoc(f.t, f.cli(append(args, "--json")...), v)
}

// screens returns what every pane of the fleet shows, for a failure's
// message.
func (f *realFleet) screens() string {
	var b strings.Builder
	srv := tmux.NewServer(f.socket)
	panes, _, _ := srv.SessionPanes(context.Background(), "fleet")
	for _, p := range panes {
		screen, _ := srv.Run(context.Background(), "", "capture-pane", "-p", "-t", p.ID)
		fmt.Fprintf(&b, "---- pane of %s ----\n%s\n", p.Agent, strings.TrimRight(screen, "\n "))
	}
	return b.String()
}

// screen returns what the pane of agent shows.
func (f *realFleet) screen(agent string) string {
	f.t.Helper()
	srv := tmux.NewServer(f.socket)
	id, err := srv.AgentPane(context.Background(), "fleet", agent)
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := srv.Run(context.Background(), "", "capture-pane", "-p", "-J", "-t", id)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// capture writes, with -update, what the pane of agent shows now into
// internal/agent/testdata/screens/PROGRAM/NAME.txt, with the test's
// folders named as a person's would be.
func (f *realFleet) capture(agent, name string) {
	f.t.Helper()
	if !*update {
		return
	}
	screen := f.screen(agent)
	base := filepath.Dir(f.repo)
	screen = strings.NewReplacer(f.home, "/home/you", base, "/home/you/src", f.dir, "/home/you/src/proj/.ai-fleet-state").Replace(screen)
	path := filepath.Join("..", "..", "internal", "agent", "testdata", "screens", programOf[agent], name+".txt")
	if err := os.WriteFile(path, []byte(screen), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// typeInto types text into the pane of agent and submits it, as a person
// at the pane would (pasted as one block, then Enter).
func (f *realFleet) typeInto(agent, text string) {
	f.t.Helper()
	p, err := tmux.NewAgentPane(tmux.NewServer(f.socket), "fleet", agent, &tmux.PaneOptions{ClearKeys: []string{}})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := p.Deliver(context.Background(), text); err != nil {
		f.t.Fatal(err)
	}
}

// until polls cond every 200 ms for realWait, and fails the test with
// what and the fleet's screens if it never holds.
func (f *realFleet) until(what string, cond func() bool) {
	f.t.Helper()
	if !fleettest.Until(realWait, 200*time.Millisecond, cond) {
		f.t.Fatalf("%s: not within %v\n%s", what, realWait, f.screens())
	}
}

// member returns what `members --json` says of name.
func (f *realFleet) member(name string) fleetstate.MemberInfo {
	f.t.Helper()
	var doc struct {
		Members []fleetstate.MemberInfo `json:"members"`
	}
	f.cliJSON(&doc, "members")
	for _, m := range doc.Members {
		if m.Name == name {
			return m
		}
	}
	f.t.Fatalf("members --json has no %s: %+v", name, doc.Members)
	return fleetstate.MemberInfo{}
}

// ready waits until every member is ready and reads status.
func (f *realFleet) ready(status string, names ...string) {
	f.t.Helper()
	for _, name := range names {
		var last fleetstate.MemberInfo
		f.until(name+" ready and "+status, func() bool {
			last = f.member(name)
			return last.Ready && last.Status == status
		})
	}
}

// request waits for the one pending permission request of member whose
// input holds what, and returns it.
func (f *realFleet) request(member, what string) fleetstate.PermissionRequest {
	f.t.Helper()
	var found fleetstate.PermissionRequest
	f.until("a permission request of "+member+" for "+what, func() bool {
		var doc struct {
			Permissions []fleetstate.PermissionRequest `json:"permissions"`
		}
		f.cliJSON(&doc, "requests")
		for _, p := range doc.Permissions {
			if p.Member == member && strings.Contains(string(p.Input), what) {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

// toolResult waits for a request to the model server that carries a tool
// result holding text, and returns that result.
func (f *realFleet) toolResult(text string) modelserver.ToolResult {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), realWait)
	defer cancel()
	var got modelserver.ToolResult
	_, err := f.model.WaitRequest(ctx, func(r modelserver.Request) bool {
		for _, tr := range r.ToolResults {
			if strings.Contains(tr.Text, text) {
				got = tr
				return true
			}
		}
		return false
	})
	if err != nil {
		f.t.Fatalf("no model request carries a tool result with %q: %v\n%s", text, err, f.screens())
	}
	return got
}

// ticket returns the outcome of the operator's ticket as poll prints it,
// without acknowledging it; the zero Outcome if poll does not list it.
func (f *realFleet) ticket(id string) fleetstate.Outcome {
	f.t.Helper()
	var doc fleetstate.TicketPage
	f.cliJSON(&doc, "poll", "--keep")
	for _, o := range doc.Tickets {
		if o.Ticket == id {
			return o
		}
	}
	return fleetstate.Outcome{}
}

// script returns a brief that steers a member's model through steps.
func script(steps ...string) string {
	return "A task from the fleet's test.\n[[script]]\n" + strings.Join(steps, "\n") + "\n[[end]]"
}

// reply is the script step that answers the turn with content.
func reply(content string) string {
	b, _ := json.Marshal(map[string]string{"content": content})
	return "tool fleet_reply " + string(b)
}

// sendWait sends brief to member from the CLI, waits for the outcome,
// and returns it.
func (f *realFleet) sendWait(member, brief string) fleetstate.Outcome {
	f.t.Helper()
	var o fleetstate.Outcome
	f.cliJSON(&o, "send", member, brief, "--wait")
	return o
}

// down brings the fleet down, and checks that no process of it is left:
// no agent, no MCP proxy, no daemon of up's, no Codex daemon.
func (f *realFleet) down() {
	t := f.t
	out, errOut, err := f.try("down", f.file, "--dir", f.dir)
	if err != nil {
		t.Errorf("down: %v\n%s%s", err, out, errOut)
	}
	var left []string
	// Every process of the fleet has the person's HOME: up's daemon, the
	// tmux server, the agents, their MCP proxies and hooks.
	for _, pid := range fleetup.ProcessesWithEnv("HOME", f.home) {
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && fleetup.Alive(pid) {
			left = append(left, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	if rec, err := os.ReadFile(filepath.Join(f.dir, ".fleetstate", fleetup.RecordFile)); err == nil {
		var r fleetup.Record
		if json.Unmarshal(rec, &r) == nil && r.PID > 0 && fleetup.Alive(r.PID) {
			left = append(left, fmt.Sprintf("%d the daemon", r.PID))
		}
	}
	if len(left) > 0 {
		t.Errorf("after down, processes of the fleet are left:\n%s", strings.Join(left, "\n"))
	}
}

// TestRealFleet runs the README's fleet with the real CLIs through every
// flow a person and a lead use, in one fleet: each member ready; a task
// from the CLI and from a real Claude Code lead's fleet_send reaching a
// member of each CLI, and the reply coming back; a member's fleet_ask
// answered; a member of each CLI committing a file in the work tree up
// made, and the person seeing it with changes and merging it into the
// lead's checkout; a permission request of each CLI shown in requests,
// allowed and denied with a message, and obeyed; a request nobody decides,
// which falls back to the CLI's own prompt while a queued brief waits;
// cancel interrupting a member's work; a daemon killed and brought back
// by up; and down leaving no process.
func TestRealFleet(t *testing.T) {
	f := newRealFleet(t, map[string]any{
		"timeouts": map[string]string{"permission": "6s", "ready": "60s"},
		// tail runs without asking: the cancelled turn below runs it.
		"approvals": map[string]any{"allow": []string{"Bash(tail -f /dev/null)"}},
		// The models the CLIs ask for, priced: each member's cost.
		"prices": realPrices,
	})
	start := time.Now()
	f.ready("IDLE", "alice", "bob")
	t.Logf("every member ready and idle %v after up", time.Since(start).Round(time.Millisecond))
	for m := range programOf {
		f.capture(m, "idle")
	}
	// A person watching: the terminal view and the dashboard.
	watch := startWatch(t, f.env, "--dir", f.dir)
	watch.waitFor("the watch shows the members", `alice[\s\S]*bob`)
	page := browserTab(t)
	if err := chromedp.Do(page, chromedp.Navigate(webLogin(t, f.dir))); err != nil {
		t.Fatal(err)
	}
	waitText(t, page, "#members", "alice", "bob")

	t.Run("task from the CLI", func(t *testing.T) {
		for _, m := range []string{"alice", "bob"} {
			o := f.sendWait(m, script(reply(m+"-cli-ok")))
			if o.Kind != fleetstate.OutcomeReply || o.Content != m+"-cli-ok" {
				t.Errorf("send %s --wait = %+v; want the reply %s-cli-ok", m, o, m)
			}
		}
	})

	t.Run("usage counted exactly", func(t *testing.T) {
		// Each member's model answers this turn with usage of its own;
		// the turn's outcome holds the answers up to its fleet_reply
		// call (the tool search before it too), the member all of them,
		// the closing answer after the reply included, read from the
		// CLI's own transcript by the status hook.
		usageOf := func() map[string]fleetstate.Usage {
			var doc struct {
				Members []fleetstate.MemberInfo `json:"members"`
			}
			f.cliJSON(&doc, "members")
			out := map[string]fleetstate.Usage{}
			for _, m := range doc.Members {
				out[m.Name] = m.Usage
			}
			return out
		}
		// The members' earlier turns are reported at their stops: wait
		// until both are idle and their counts hold still.
		f.ready("IDLE", "alice", "bob")
		last := usageOf()
		f.until("the members' usage holding still", func() bool {
			time.Sleep(time.Second)
			now := usageOf()
			still := maps.Equal(now, last)
			last = now
			return still
		})
		for i, m := range []string{"alice", "bob"} {
			f.ready("IDLE", m)
			before := usageOf()
			in, out := 1000+int64(i)*111+7, 30+int64(i)*3
			o := f.sendWait(m, script(fmt.Sprintf("usage %d %d", in, out), reply(m+"-usage-ok")))
			if o.Kind != fleetstate.OutcomeReply {
				t.Fatalf("send %s --wait = %+v; want its reply", m, o)
			}
			f.ready("IDLE", m)
			var calls, answers int64
			for _, r := range f.model.Requests() {
				if r.Answer.Usage == (modelserver.Usage{InputTokens: int(in), OutputTokens: int(out)}) {
					answers++
					if r.Answer.Tool != "" {
						calls++
					}
				}
			}
			if calls == 0 || answers <= calls {
				t.Fatalf("%s's model answered %d times with the turn's usage, %d of them tool calls; want the reply's call and a closing answer", m, answers, calls)
			}
			// Claude Code's hook before each tool reads the call that asked
			// for it; Codex runs no hook before an MCP tool, and the daemon
			// reads its transcript at the reply for the call that asked
			// for fleet_reply.
			turnCalls := calls
			var got fleetstate.Usage
			if o.Usage != nil {
				got = *o.Usage
			}
			if want := (fleetstate.Usage{Input: turnCalls * in, Output: turnCalls * out}); got != want {
				t.Errorf("%s's outcome used %+v; want %+v: %d answers up to its reply", m, got, want, turnCalls)
			}
			want := before[m].Add(fleetstate.Usage{Input: answers * in, Output: answers * out})
			var now map[string]fleetstate.Usage
			if !fleettest.Until(30*time.Second, 200*time.Millisecond, func() bool {
				now = usageOf()
				return now[m] == want
			}) {
				t.Fatalf("%s's usage after its turn = %+v; want %+v: %+v before, and %d answers of %d in and %d out",
					m, now[m], want, before[m], answers, in, out)
			}
			for other, u := range before {
				if other != m && now[other] != u {
					t.Errorf("%s's turn changed %s's usage: %+v to %+v", m, other, u, now[other])
				}
			}
		}
		var doc struct {
			Members []fleetstate.MemberInfo `json:"members"`
		}
		f.cliJSON(&doc, "members")
		var sum fleetstate.Usage
		for _, mi := range doc.Members {
			sum = sum.Add(mi.Usage)
		}
		if text := f.cli("members"); !strings.Contains(text, "fleet: used "+leadcli.FormatUsage(sum)) {
			t.Errorf("members does not total the fleet's usage %+v:\n%s", sum, text)
		}
		// Each member calls one model, which its transcript names: its
		// cost is its usage at that model's price.
		for _, mi := range doc.Members {
			p := realPrices[modelOf[mi.Name]]
			u := mi.Usage
			want := (float64(u.Input)*p.Input + float64(u.Output)*p.Output + float64(u.CacheRead)*p.CacheRead + float64(u.CacheWrite)*p.CacheWrite) / 1e6
			if mi.Cost == nil || math.Abs(*mi.Cost-want) > 1e-9 || mi.Unpriced {
				t.Errorf("%s's cost = %v (unpriced %v); want %v, its usage %+v at %s's price", mi.Name, mi.Cost, mi.Unpriced, want, u, modelOf[mi.Name])
			}
		}
	})

	t.Run("turn done without a reply shows what the member said", func(t *testing.T) {
		for _, m := range []string{"alice", "bob"} {
			said := m + " ends this turn with these words"
			o := f.sendWait(m, script("say "+said))
			if o.Kind != fleetstate.OutcomeTurnDone || !strings.Contains(o.Content, said) {
				t.Errorf("send %s --wait = %+v; want turn_done with a tail that holds %q; the pane:\n%s", m, o, said, f.screen(m))
			}
		}
	})

	t.Run("task from the lead", func(t *testing.T) {
		for _, m := range []string{"alice", "bob"} {
			args, _ := json.Marshal(map[string]any{"to": m, "content": script(reply(m + "-lead-ok"))})
			f.typeInto("lead", script("tool fleet_send "+string(args), "say sent"))
			f.toolResult(m + "-lead-ok")
		}
	})

	t.Run("task from the dashboard", func(t *testing.T) {
		for _, m := range []string{"alice", "bob"} {
			if err := chromedp.Do(page, chromedp.SetValue("", m, byRole("#send", "combobox", "Member"))); err != nil {
				t.Fatal(err)
			}
			typeRole(t, page, "#send", "textbox", "Brief", script(reply(m+"-dashboard-ok")))
			clickRole(t, page, "#send", "button", "Send")
			f.until(m+"'s reply to the dashboard's task", func() bool {
				var doc fleetstate.TicketPage
				f.cliJSON(&doc, "poll", "--keep")
				for _, o := range doc.Tickets {
					if o.From == m && o.Kind == fleetstate.OutcomeReply && o.Content == m+"-dashboard-ok" {
						return true
					}
				}
				return false
			})
		}
	})

	t.Run("question answered", func(t *testing.T) {
		for _, m := range []string{"alice", "bob"} {
			var sent fleetstate.Outcome
			f.cliJSON(&sent, "send", m, script(`tool fleet_ask {"question":"which branch, `+m+`?"}`, reply(m+"-asked")))
			var q fleetstate.Outcome
			f.until(m+"'s question", func() bool {
				q = f.ticket(sent.Ticket)
				return q.Kind == fleetstate.OutcomeQuestion && strings.Contains(q.Content, "which branch, "+m)
			})
			turn := q.TurnID
			// The answer goes on with the member's turn, and the command
			// prints how it ended.
			var o fleetstate.Outcome
			f.cliJSON(&o, "answer", turn, "use main, "+m)
			f.toolResult("use main, " + m)
			if o.Kind != fleetstate.OutcomeReply || o.Content != m+"-asked" {
				t.Errorf("answer = %+v; want %s's reply %s-asked", o, m, m)
			}
		}
	})

	t.Run("member's commit merged by the lead", func(t *testing.T) {
		for _, m := range []string{"alice", "bob"} {
			// The member writes a file in its work tree with its shell
			// tool and commits it; the write asks, and the person allows.
			name, content := m+".txt", m+" was here"
			var sent fleetstate.Outcome
			f.cliJSON(&sent, "send", m, script("bash printf '"+content+"\\n' > "+name+" && git add -A && git commit -q -m '"+m+": "+name+"'", reply(m+"-committed")))
			f.cli("approve", f.request(m, name).ID)
			f.until(m+"'s reply after its commit", func() bool {
				o := f.ticket(sent.Ticket)
				return o.Kind == fleetstate.OutcomeReply && o.Content == m+"-committed"
			})
			var c worktree.Changes
			f.cliJSON(&c, "changes", m)
			if c.Worktree != f.tree(m) || c.Branch != m || c.Into != "main" || c.Ahead != 1 ||
				!slices.Equal(c.Files, []worktree.FileChange{{Path: name, Added: 1}}) || len(c.Uncommitted) != 0 {
				t.Fatalf("changes %s = %+v; want one commit on branch %s adding %s, nothing uncommitted", m, c, m, name)
			}
			commit := f.git("rev-parse", m)
			var done daemon.Merge
			f.cliJSON(&done, "merge", m)
			if !done.Merged || done.Branch != m || done.Into != "main" || done.Commit != f.git("rev-parse", "main") {
				t.Fatalf("merge %s = %+v; want %s merged into main", m, done, m)
			}
			if data, err := os.ReadFile(filepath.Join(f.repo, name)); err != nil || string(data) != content+"\n" {
				t.Errorf("%s in the lead's checkout after the merge: %q, %v; want %q", name, data, err, content+"\n")
			}
			// The lead's branch holds the member's commit: git exits 1 if not.
			f.git("merge-base", "--is-ancestor", commit, "main")
		}
	})

	t.Run("permission allowed and denied", func(t *testing.T) {
		for _, m := range []string{"alice", "bob"} {
			wt := f.tree(m)
			f.cli("send", m, script("bash echo one > one.txt", "bash echo two > two.txt", reply(m+"-permissions")))
			p := f.request(m, "one.txt")
			if out := f.cli("requests"); !strings.Contains(out, p.ID[:8]) || !strings.Contains(out, "echo one > one.txt") {
				t.Errorf("requests does not show %s's request:\n%s", m, out)
			}
			watch.waitFor("the watch shows "+m+"'s request", m+`.*Bash.*echo one > one\.txt`)
			waitText(t, page, "#requests", m, "echo one > one.txt")
			f.cli("approve", p.ID)
			f.until(m+" ran the allowed command", func() bool {
				data, err := os.ReadFile(filepath.Join(wt, "one.txt"))
				return err == nil && string(data) == "one\n"
			})
			p = f.request(m, "two.txt")
			f.cli("deny", p.ID, "--message", "not in this tree, "+m)
			f.toolResult("not in this tree, " + m)
			if _, err := os.Stat(filepath.Join(wt, "two.txt")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s ran the denied command: %v", m, err)
			}
		}
	})

	t.Run("undecided request falls back to the CLI's prompt", func(t *testing.T) {
		for _, m := range []string{"alice", "bob"} {
			f.ready("IDLE", m)
			// A person gives the member work at its pane; its command asks.
			f.typeInto(m, script("bash echo three > three.txt", "say done"))
			f.request(m, "three.txt")
			var info fleetstate.MemberInfo
			f.until(m+" BLOCKED on its own prompt, with the question", func() bool {
				info = f.member(m)
				return info.Status == "BLOCKED" && strings.Contains(info.Question, "three.txt")
			})
			f.capture(m, "blocked-permission")
			brief := script(reply(m + "-after-prompt"))
			var queued fleetstate.Outcome
			f.cliJSON(&queued, "send", m, brief)
			// For a few seconds, in which the member's watcher reads it
			// BLOCKED a few times, the brief stays queued and out of the
			// pane.
			if fleettest.Until(3*time.Second, 200*time.Millisecond, func() bool {
				info := f.member(m)
				return info.Queued != 1 || info.Status != "BLOCKED" || strings.Contains(f.screen(m), m+"-after-prompt")
			}) {
				t.Fatalf("%s while its prompt shows: %+v; want BLOCKED with the brief queued, not typed:\n%s", m, f.member(m), f.screen(m))
			}
			// The person answers the prompt: no.
			srv := tmux.NewServer(f.socket)
			id, _ := srv.AgentPane(context.Background(), "fleet", m)
			if _, err := srv.Run(context.Background(), "", "send-keys", "-t", id, "Escape"); err != nil {
				t.Fatal(err)
			}
			f.until(m+"'s queued brief answered", func() bool {
				o := f.ticket(queued.Ticket)
				return o.Kind == fleetstate.OutcomeReply && o.Content == m+"-after-prompt"
			})
		}
	})

	t.Run("cancel interrupts the member", func(t *testing.T) {
		for _, m := range []string{"alice", "bob"} {
			f.ready("IDLE", m)
			var sent fleetstate.Outcome
			f.cliJSON(&sent, "send", m, script("bash tail -f /dev/null", reply(m+"-never")))
			wt := f.tree(m)
			working := func() bool {
				for _, pid := range fleetup.ProcessesWithEnv("HOME", f.home) {
					cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
					cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
					if string(cmd) == "tail\x00-f\x00/dev/null\x00" && cwd == wt {
						return true
					}
				}
				return false
			}
			f.until(m+" runs its endless command", working)
			f.until(m+" reads WORKING", func() bool { return f.member(m).Status == "WORKING" })
			f.capture(m, "working")
			f.cli("cancel", sent.Ticket)
			f.until(m+"'s command stopped by the cancel", func() bool { return !working() })
		}
	})

	t.Run("daemon killed and brought back", func(t *testing.T) {
		var rec fleetup.Record
		data, err := os.ReadFile(filepath.Join(f.dir, ".fleetstate", fleetup.RecordFile))
		if err != nil || json.Unmarshal(data, &rec) != nil || rec.PID == 0 {
			t.Fatalf("no daemon in the fleet's record: %v", err)
		}
		fleetup.SignalTree(rec.PID, 9)
		f.until("the daemon gone", func() bool { return !fleetup.Alive(rec.PID) })
		f.run("up", f.file, "--dir", f.dir)
		f.ready("IDLE", "alice", "bob")
		for _, m := range []string{"alice", "bob"} {
			if o := f.sendWait(m, script(reply(m+"-after-restart"))); o.Content != m+"-after-restart" {
				t.Errorf("send %s after the restart = %+v", m, o)
			}
		}
	})
	t.Logf("the fleet's flows took %v", time.Since(start).Round(time.Millisecond))
}
