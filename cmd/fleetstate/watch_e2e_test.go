package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
)

// watchPane is `fleetstate watch` running in a tmux pane on a private
// socket.
type watchPane struct {
	t      *testing.T
	sock   string
	status string // the file the pane's shell writes the watch's exit status to
}

// startWatch runs `fleetstate watch args…` in a detached 160×50 tmux
// session whose pane stays after the command exits, so that its exit
// status can be read. The socket's cleanup kills the server.
func startWatch(t *testing.T, env []string, args ...string) *watchPane {
	t.Helper()
	p := &watchPane{t: t, sock: fleettest.TmuxSocket(t), status: filepath.Join(t.TempDir(), "status")}
	tmuxArgs := []string{"-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "50", "-s", "w"}
	for _, e := range env {
		tmuxArgs = append(tmuxArgs, "-e", e)
	}
	// The shell writes the exit status to a file: tmux's own record of it
	// comes only once tmux has reaped the process, which it may do late.
	cmd := append([]string{binary, "watch"}, args...)
	line := strings.Join(cmd, " ") + "; echo $? > " + p.status
	p.tmux(append(tmuxArgs, line, ";", "set-option", "-w", "-t", "w", "remain-on-exit", "on")...)
	return p
}

func (p *watchPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", p.sock}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

func (p *watchPane) screen() string { return p.tmux("capture-pane", "-p", "-t", "w") }

// waitFor waits until the pane's screen matches re, and fails the test
// with the screen otherwise.
func (p *watchPane) waitFor(what, re string) {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	var last string
	if !fleettest.Until(20*time.Second, 50*time.Millisecond, func() bool {
		last = p.screen()
		return rx.MatchString(last)
	}) {
		p.t.Fatalf("%s: the screen never matched %q:\n%s", what, re, last)
	}
}

// exited waits for the pane's command to exit and returns its status.
func (p *watchPane) exited() string {
	p.t.Helper()
	var status string
	if !fleettest.Until(10*time.Second, 50*time.Millisecond, func() bool {
		data, err := os.ReadFile(p.status)
		status = strings.TrimSpace(string(data))
		return err == nil && status != ""
	}) {
		p.t.Fatalf("the watch did not exit:\n%s", p.screen())
	}
	return status
}

// The watch view, driven for real: a daemon, MCP clients that make
// things happen, and the screen of `fleetstate watch` in a tmux pane
// showing the members and their turns change; it follows the daemon
// through a restart and quits on q.
func TestWatchInTmux(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "scout": "member"})
	d := startDaemon(t, dir)
	bg := context.Background()

	p := startWatch(t, nil, "--dir", dir)
	p.waitFor("the snapshot", `live[\s\S]*MEMBERS \(1\)[\s\S]*scout\s+no\s+PULL\s+0\s+-\s+-`)
	scout := connectHTTP(t, d.url, tokens["scout"])
	lead := connectHTTP(t, d.url, tokens["lead"])
	// A member becomes ready when it first calls: fleet_next with no
	// work waiting returns empty.
	ok(bg, t, scout, "fleet_next", map[string]any{"wait_s": 0})
	p.waitFor("the member's readiness", `scout\s+yes\s+PULL\s+0\s+-\s+-`)

	sent := ok(bg, t, lead, "fleet_send", map[string]any{"to": "scout", "content": "map the north", "wait": false})
	ticket := strings.TrimPrefix(sent["ticket"].(string), "ticket-")[:8]
	p.waitFor("the queued message", `scout\s+yes\s+PULL\s+1\s+-\s+-[\s\S]*`+ticket+`\s+scout\s+lead\s+queued\s+\d+s\s+"map the north"`)

	ok(bg, t, scout, "fleet_next", map[string]any{"wait_s": 5})
	p.waitFor("the open turn", `scout\s+yes\s+PULL\s+0\s+-\s+working \d+s[\s\S]*`+ticket+`\s+scout\s+lead\s+working`)
	p.waitFor("the open turn's age ticking", `scout\s+yes\s+PULL\s+0\s+-\s+working [1-9]\d*s`)

	ok(bg, t, scout, "fleet_reply", map[string]any{"content": "north is clear", "usage_source": "scout's process", "input_tokens": 1500, "output_tokens": 20})
	p.waitFor("the outcome", `scout\s+yes\s+PULL\s+0\s+1\.5k in 20 out\s+-[\s\S]*`+ticket+`\s+scout\s+lead\s+done\s+\d+s\s+reply: "north is clear"[\s\S]*outcome\s+scout\s+reply: "north is clear"`)

	// The daemon restarts on another port, with a new operator token:
	// the view says it is gone, then finds the new one by itself.
	oldBase := strings.TrimSuffix(d.url, "/mcp")
	d.kill(syscall.SIGTERM)
	p.waitFor("the daemon's absence", `disconnected: no daemon serves `+regexp.QuoteMeta(dir))
	p.waitFor("the members marked stale", `MEMBERS \(1\)\s+stale: as last seen at [\d:]+, before the daemon went[\s\S]*scout\s+stale\s+PULL`)
	d2 := startDaemon(t, dir)
	newBase := strings.TrimSuffix(d2.url, "/mcp")
	if newBase == oldBase {
		t.Logf("the new daemon got the old port again: %s", newBase)
	}
	p.waitFor("the restarted daemon", regexp.QuoteMeta(newBase)+`\s+live[\s\S]*`+ticket+`\s+scout\s+lead\s+done`)

	// With --dir the view acts as the operator, with the new daemon's
	// operator token: a task sent with s reaches the member from
	// "operator".
	p.tmux("send-keys", "-t", "w", "s")
	p.waitFor("the member choice", `send to: scout`)
	p.tmux("send-keys", "-t", "w", "Enter")
	p.tmux("send-keys", "-t", "w", "-l", "hello from the operator")
	p.tmux("send-keys", "-t", "w", "Enter")
	p.waitFor("the operator's send", `sent ticket \w+ to scout`)
	scout2 := connectHTTP(t, d2.url, tokens["scout"])
	if msg := ok(bg, t, scout2, "fleet_next", map[string]any{"wait_s": 10}); msg["content"] != "hello from the operator" || msg["from"] != "operator" {
		t.Fatalf("scout's fleet_next after the operator's send = %v; want the task, from operator", msg)
	}

	p.tmux("send-keys", "-t", "w", "q")
	if status := p.exited(); status != "0" {
		t.Fatalf("the watch exited with status %s; want 0:\n%s", status, p.screen())
	}
}

// With --url the view watches as the lead whose token is in $FLEET_TOKEN.
func TestWatchURLInTmux(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "scout": "member"})
	d := startDaemon(t, dir)
	p := startWatch(t, []string{"FLEET_TOKEN=" + tokens["lead"]}, "--url", d.url)
	p.waitFor("the snapshot", regexp.QuoteMeta(strings.TrimSuffix(d.url, "/mcp"))+`\s+live[\s\S]*scout\s+no\s+PULL`)
	ok(context.Background(), t, connectHTTP(t, d.url, tokens["lead"]), "fleet_send", map[string]any{"to": "scout", "content": "hello", "wait": false})
	p.waitFor("the queued message", `scout\s+no\s+PULL\s+1`)
	p.tmux("send-keys", "-t", "w", "C-c")
	if status := p.exited(); status != "0" {
		t.Fatalf("the watch exited with status %s on ctrl-c; want 0:\n%s", status, p.screen())
	}
}

// Without a daemon, or with a token that is not a lead's, the watch says
// what to do and exits, without starting the view or creating anything.
func TestWatchErrorsNameTheFix(t *testing.T) {
	missing, empty := t.TempDir()+"/nothing-here", t.TempDir()
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no directory", nil, []string{"--dir", missing}, "no daemon serves " + missing + ": start `fleetstate serve --dir " + missing + "`"},
		{"no daemon", nil, []string{"--dir", empty}, "no daemon serves " + empty},
		{"no token", []string{"FLEET_TOKEN="}, []string{"--url", "http://127.0.0.1:1/mcp"}, "--url needs a lead's token in $FLEET_TOKEN"},
		{"nothing listens", []string{"FLEET_TOKEN=fst_x"}, []string{"--url", "http://127.0.0.1:1/mcp"}, "no daemon at http://127.0.0.1:1: start `fleetstate serve`"},
		{"both", nil, []string{"--dir", "x", "--url", "http://127.0.0.1:1"}, "give --dir or --url, not both"},
		{"not a URL", []string{"FLEET_TOKEN=fst_x"}, []string{"--url", "127.0.0.1:1"}, "is not an http URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binary, append([]string{"watch"}, c.args...)...)
			cmd.Env = append(os.Environ(), c.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil || !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("watch %v: %v, stderr %q; want a failure saying %q", c.args, err, stderr.String(), c.want)
			}
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("watch created %s: %v", missing, err)
	}
	if entries, err := os.ReadDir(empty); err != nil || len(entries) != 0 {
		t.Errorf("watch wrote into the empty directory: %v %v", entries, err)
	}

	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "scout": "member"})
	d := startDaemon(t, dir)
	cmd := exec.Command(binary, "watch", "--url", d.url)
	cmd.Env = append(os.Environ(), "FLEET_TOKEN="+tokens["scout"])
	out, err := cmd.CombinedOutput()
	if want := "401: --url needs a lead's token in $FLEET_TOKEN"; err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("watch with a member's token: %v, %q; want %q", err, out, want)
	}
}

// The watch's keys act, for real, as the lead whose token it shows: s
// sends a task that the member's fleet_next gets, a answers the member's
// question (its fleet_ask returns the text, and the turn's outcome stays
// on the ticket for the lead), c cancels a queued ticket after y.
func TestWatchKeysActInTmux(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "scout": "member"})
	d := startDaemon(t, dir)
	bg := context.Background()
	scout := connectHTTP(t, d.url, tokens["scout"])
	lead := connectHTTP(t, d.url, tokens["lead"])
	ok(bg, t, scout, "fleet_next", map[string]any{"wait_s": 0})

	p := startWatch(t, []string{"FLEET_TOKEN=" + tokens["lead"]}, "--url", d.url)
	p.waitFor("the snapshot with the keys", `scout\s+yes[\s\S]*a answer · c cancel · s send`)
	// The member became ready before the watch connected: the event is
	// listed at once, from the snapshot's recent events.
	p.waitFor("the recent events", `EVENTS\s+\d\d:\d\d:\d\d\s+ready\s+scout`)
	keys := func(k ...string) { p.tmux(append([]string{"send-keys", "-t", "w"}, k...)...) }

	// s: choose the member (the only one), type the brief, enter.
	keys("s")
	p.waitFor("the member choice", `send to: scout`)
	keys("Enter")
	p.waitFor("the brief prompt", `brief for scout: `)
	keys("-l", "map the west")
	keys("Enter")
	p.waitFor("the send's notice", `sent ticket [0-9a-f]{8} to scout`)
	msg := ok(bg, t, scout, "fleet_next", map[string]any{"wait_s": 5})
	if msg["content"] != "map the west" || msg["from"] != "lead" {
		t.Fatalf("the member's fleet_next: %v; want the brief from the lead", msg)
	}
	turn := msg["turn_id"].(string)

	// a: the member asks; the watch answers.
	asked := make(chan map[string]any, 1)
	go func() {
		res, _ := call(bg, t, scout, "fleet_ask", map[string]any{"question": "which shaft?", "turn_id": turn})
		asked <- res
	}()
	p.waitFor("the question", `QUESTIONS \(1\)[\s\S]*scout\s+[0-9a-f]{8}\s+lead\s+"which shaft\?"`)
	keys("a")
	p.waitFor("the answer prompt", `answer scout: `)
	keys("-l", "the east one")
	keys("Enter")
	select {
	case res := <-asked:
		if res["answer"] != "the east one" || res["timed_out"] != false {
			t.Fatalf("the member's fleet_ask returned %v; want the watch's answer", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the member's fleet_ask did not return:\n%s", p.screen())
	}
	p.waitFor("the answer's notice", `answered scout`)
	ok(bg, t, scout, "fleet_reply", map[string]any{"content": "east is clear", "turn_id": turn})
	var held map[string]any
	for _, tk := range ok(bg, t, lead, "fleet_poll", map[string]any{"wait_s": 5})["tickets"].([]any) {
		if tk := tk.(map[string]any); tk["turn_id"] == turn {
			held = tk
		}
	}
	if held["outcome"] != "reply" || held["content"] != "east is clear" {
		t.Errorf("the lead's poll of the turn's ticket: %v; want the reply held for it", held)
	}
	ok(bg, t, lead, "fleet_ack", map[string]any{"ticket": held["ticket"]})

	// c: a queued ticket, selected in TICKETS, cancelled after y.
	sent := ok(bg, t, lead, "fleet_send", map[string]any{"to": "scout", "content": "dig deeper", "wait": false})
	queued := sent["ticket"].(string)
	p.waitFor("the queued ticket", strings.TrimPrefix(queued, "ticket-")[:8]+`\s+scout\s+lead\s+queued`)
	keys("Tab")
	p.waitFor("the tickets section", `tab section \(tickets\)`)
	keys("j") // the newest ticket is the last row
	p.waitFor("the queued ticket selected", `▸ `+strings.TrimPrefix(queued, "ticket-")[:8])
	keys("c")
	p.waitFor("the confirmation", `cancel ticket `+strings.TrimPrefix(queued, "ticket-")[:8]+` of scout\? y/n`)
	keys("y")
	p.waitFor("the cancel's notice", `cancelled ticket `+strings.TrimPrefix(queued, "ticket-")[:8])
	if next := ok(bg, t, scout, "fleet_next", map[string]any{"wait_s": 0}); next["outcome"] != "none" {
		t.Errorf("the member's fleet_next after the cancel: %v; want none", next)
	}
	if o := ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": queued}); o["outcome"] != "failed" || o["reason"] != "cancelled" {
		t.Errorf("the cancelled ticket: %v; want failed, cancelled", o)
	}

	keys("q")
	if status := p.exited(); status != "0" {
		t.Fatalf("the watch exited with status %s; want 0:\n%s", status, p.screen())
	}
}

// TestWatchDecidesPermissionsInTmux: a member's agent asks through its
// PermissionRequest hook (the real `fleetstate hook permission`); the
// request shows in the watch, which acts as the operator (--dir). y on
// the selected request shows it whole and a second y allows it, and the
// hook prints the allow; n on the next shows it, takes a message, and
// the hook prints the denial with it.
func TestWatchDecidesPermissionsInTmux(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"scout": "member"})
	d := startDaemon(t, dir)
	p := startWatch(t, nil, "--dir", dir)
	p.waitFor("the snapshot", `live[\s\S]*MEMBERS`)
	keys := func(k ...string) { p.tmux(append([]string{"send-keys", "-t", "w"}, k...)...) }

	for _, c := range []struct {
		key, command string
		want         []string
	}{
		{"y", "go test ./...", []string{`"behavior":"allow"`}},
		{"n", "rm -rf build", []string{`"behavior":"deny"`, "not the shared build"}},
	} {
		h := runHook(t, d.url, tokens["scout"], c.command, time.Minute)
		p.waitFor("the request", `PERMISSION REQUESTS \(1\)[\s\S]*scout\s+Bash\s+\d+s\s+"`+regexp.QuoteMeta(c.command))
		for range 4 { // tab moves through members, tickets, questions, requests
			if strings.Contains(p.screen(), "tab section (requests)") {
				break
			}
			keys("Tab")
			time.Sleep(200 * time.Millisecond)
		}
		p.waitFor("the requests section", `tab section \(requests\)`)
		// A request that left takes the selection with it: the next one
		// is selected afresh.
		keys("Down")
		p.waitFor("the request selected", `▸ \S+\s+scout\s+Bash`)
		keys(c.key)
		p.waitFor("the request whole", `PERMISSION REQUEST perm-[\s\S]*`+regexp.QuoteMeta(c.command))
		if c.key == "y" {
			keys("y")
		} else {
			keys("-l", "not the shared build")
			keys("Enter")
		}
		select {
		case <-h.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("the hook had no decision 20s after %s in the watch:\n%s", c.key, p.screen())
		}
		got := h.output(t, time.Second)
		for _, want := range c.want {
			if !strings.Contains(got, want) {
				t.Fatalf("the hook after %s in the watch printed %q; want %s", c.key, got, want)
			}
		}
		p.waitFor("the request gone", `PERMISSION REQUESTS \(0\)`)
	}
}

// TestWatchMergesAMembersWorkInTmux: a fleet that up brought up in a git
// project, whose member alice has a work tree. The watch, as the
// operator (--dir), shows alice's branch and the files she changed; m
// asks, y merges: refused first by the fleet file's check, with the
// lead's checkout unchanged, then, once alice fixed it and w read her
// work again, merged, and the lead's checkout holds her work.
func TestWatchMergesAMembersWorkInTmux(t *testing.T) {
	f, project, tree, up := worktreeFleet(t, map[string]any{"check": "test ! -e broken"})
	up()
	commitFile(t, tree, "alice.txt", "alice's work\n")
	commitFile(t, tree, "broken", "x\n")
	head := gitIn(t, project, "rev-parse", "HEAD")

	p := startWatch(t, nil, "--dir", f.dir)
	keys := func(k ...string) { p.tmux(append([]string{"send-keys", "-t", "w"}, k...)...) }
	p.waitFor("alice's work", `▸ alice[\s\S]*WORK OF alice\s+branch alice, 2 ahead of main and 0 behind · 2 files \+2 -0[\s\S]*\+1\s+-0\s+alice\.txt[\s\S]*m merge · w work`)

	keys("m")
	p.waitFor("the confirmation", `merge alice's branch alice \(2 ahead, 2 files\) into main\? y merges · esc/n leaves`)
	keys("y")
	p.waitFor("the refusal", `merge refused at [\d:]+ \(check_failed\): the check "test ! -e broken" failed`)
	if now := gitIn(t, project, "rev-parse", "HEAD"); now != head {
		t.Fatalf("a refused merge moved the lead from %s to %s", head, now)
	}

	gitIn(t, tree, "rm", "--quiet", "broken")
	gitIn(t, tree, "commit", "--quiet", "-m", "unbreak")
	keys("w")
	p.waitFor("alice's work read again", `WORK OF alice\s+branch alice, 3 ahead of main and 0 behind · 1 file \+1 -0`)
	keys("m")
	p.waitFor("the confirmation", `merge alice's branch alice \(3 ahead, 1 file\) into main\?`)
	keys("y")
	p.waitFor("the merge", `merged at [\d:]+: alice into main at [0-9a-f]{12}`)
	commit := regexp.MustCompile(`merged at [\d:]+: alice into main at ([0-9a-f]{12})`).FindStringSubmatch(p.screen())
	if now := gitIn(t, project, "rev-parse", "HEAD"); commit == nil || !strings.HasPrefix(now, commit[1]) {
		t.Fatalf("the watch says it merged at %v; the lead's checkout is at %s", commit, now)
	}
	if b, err := os.ReadFile(filepath.Join(project, "alice.txt")); err != nil || string(b) != "alice's work\n" {
		t.Errorf("alice.txt in the lead's checkout: %q, %v", b, err)
	}
	// The merged event reads alice's work again: nothing left to merge.
	p.waitFor("alice's work after the merge", `WORK OF alice\s+branch alice, 0 ahead of main[\s\S]*no files changed[\s\S]*merged\s+alice\s+by operator`)
}
