package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Faults with real processes: the daemon killed under load, connections
// of leads and members dropped in the middle of their calls, panes dying,
// stdio servers sharing a directory, clients that stop reading.

var killRounds = flag.Int("kill-rounds", 3, "rounds of TestFaultDaemonKilledUnderLoad (each kills the daemon once)")

// ---- 1. the daemon killed during a stream of puts and sends ----------------

// sealed returns content that proves itself whole: name, sequence number,
// the hash of the payload and the payload. A torn file fails unseal.
func sealed(name string, seq int, size int) string {
	payload := strings.Repeat(strconv.Itoa(seq%10), size)
	sum := sha256.Sum256([]byte(payload))
	return fmt.Sprintf("%s|%d|%s|%s", name, seq, hex.EncodeToString(sum[:]), payload)
}

// unseal checks content made by sealed and returns its name and sequence.
func unseal(content string) (name string, seq int, ok bool) {
	parts := strings.SplitN(content, "|", 4)
	if len(parts) != 4 {
		return "", 0, false
	}
	sum := sha256.Sum256([]byte(parts[3]))
	if hex.EncodeToString(sum[:]) != parts[2] {
		return "", 0, false
	}
	seq, err := strconv.Atoi(parts[1])
	return parts[0], seq, err == nil
}

// loadLedger is what the clients were told before the daemon died.
type loadLedger struct {
	mu        sync.Mutex
	puts      map[string]string // acknowledged puts: file name → content
	counter   map[string]int    // acknowledged overwrites: file name → highest sequence
	accepted  map[string]string // accepted sends: turn ID → content
	delivered map[string]string // messages members received: turn ID → member
	replied   map[string]string // acknowledged replies: turn ID → content
	calls     int               // calls that were answered
	broken    int               // calls the kill broke
}

func newLoadLedger() *loadLedger {
	return &loadLedger{puts: map[string]string{}, counter: map[string]int{}, accepted: map[string]string{},
		delivered: map[string]string{}, replied: map[string]string{}}
}

func (l *loadLedger) note(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

// TestFaultDaemonKilledUnderLoad kills the daemon with SIGKILL while
// clients put files and a lead sends work that members take and reply to,
// restarts it on the same directory and checks: no torn file, no visible
// temporary file, every acknowledged put readable with its content, every
// accepted message delivered or still queued (and never delivered twice),
// every acknowledged reply held on its ticket.
func TestFaultDaemonKilledUnderLoad(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "m1": "member", "m2": "member", "writer": "member"})
	d := startDaemon(t, dir)
	lead := connectHTTP(t, d.url, tokens["lead"])
	ok(context.Background(), t, lead, "new_session", map[string]any{"name": "under fire"})
	var totals struct{ puts, sends, unheard, delivered, replies, inTransit, leftovers, broken, calls int }
	for round := range *killRounds {
		l := newLoadLedger()
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		// Writers: new files, and one file overwritten again and again.
		for w := range 3 {
			cs, err := connectQuiet(d.url, tokens["writer"])
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					name := fmt.Sprintf("r%d/w%d/f%05d.txt", round, w, i)
					content := sealed(name, i, 1+rand.IntN(32<<10))
					if i%3 == 2 {
						name = fmt.Sprintf("r%d/w%d/counter.txt", round, w)
						content = sealed(name, i, 1+rand.IntN(32<<10))
					}
					_, isErr, err := tryCall(ctx, cs, "put", map[string]any{"agent_name": "writer", "file_name": name, "content": content, "overwrite": i%3 == 2})
					l.note(func() {
						switch {
						case err != nil:
							l.broken++
						case isErr:
							t.Errorf("put %s refused", name)
						case i%3 == 2:
							l.calls++
							l.counter[name] = i
						default:
							l.calls++
							l.puts[name] = content
						}
					})
					if err != nil {
						return
					}
				}
			})
		}
		// The lead sends detached work to both members.
		lcs, err := connectQuiet(d.url, tokens["lead"])
		if err != nil {
			t.Fatal(err)
		}
		defer lcs.Close()
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				to := []string{"m1", "m2"}[i%2]
				content := fmt.Sprintf("msg r%d #%d for %s", round, i, to)
				o, isErr, err := tryCall(ctx, lcs, "fleet_send", map[string]any{"to": to, "content": content, "wait": false})
				l.note(func() {
					switch {
					case err != nil:
						l.broken++
					case isErr || o["outcome"] != "pending":
						t.Errorf("send refused: %v", o)
					default:
						l.calls++
						l.accepted[o["turn_id"].(string)] = content
					}
				})
				if err != nil {
					return
				}
			}
		})
		// Members take their messages and reply to each.
		for _, m := range []string{"m1", "m2"} {
			cs, err := connectQuiet(d.url, tokens[m])
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			wg.Go(func() {
				for ctx.Err() == nil {
					msg, isErr, err := tryCall(ctx, cs, "fleet_next", map[string]any{"wait_s": 1})
					if err != nil {
						l.note(func() { l.broken++ })
						return
					}
					turn, _ := msg["turn_id"].(string)
					if isErr || turn == "" {
						continue
					}
					l.note(func() {
						l.calls++
						if prev, dup := l.delivered[turn]; dup {
							t.Errorf("turn %s delivered twice (to %s and %s)", turn, prev, m)
						}
						l.delivered[turn] = m
					})
					reply := "reply to " + turn
					_, isErr, err = tryCall(ctx, cs, "fleet_reply", map[string]any{"content": reply})
					if err != nil {
						l.note(func() { l.broken++ })
						return
					}
					if !isErr {
						l.note(func() { l.calls++; l.replied[turn] = reply })
					}
				}
			})
		}
		time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond) // load runs; the kill comes at a random instant
		d.kill(syscall.SIGKILL)
		stop()
		wg.Wait()

		// On disk, before any process touches the directory again: no
		// stored file is torn; temporary files may be left, unseen.
		leftovers := 0
		err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.Contains(p, "/writer/") {
				return err
			}
			if strings.HasPrefix(e.Name(), ".fleetstate-tmp-") {
				leftovers++
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, _, ok := unseal(string(data)); !ok {
				t.Errorf("torn file on disk: %s (%d bytes)", p, len(data))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		d = startDaemon(t, dir)
		lead = connectHTTP(t, d.url, tokens["lead"])
		bg := context.Background()
		// Every acknowledged put is there, whole; no temporary file shows.
		files := ok(bg, t, lead, "list", map[string]any{"agent_name": "writer"})["files"].([]any)
		listed := map[string]string{}
		for _, f := range files {
			fm := f.(map[string]any)
			name := fm["file_name"].(string)
			if strings.Contains(name, ".fleetstate-tmp-") {
				t.Errorf("list shows a temporary file: %s", name)
			}
			if strings.HasPrefix(name, fmt.Sprintf("r%d/", round)) {
				listed[name] = fm["id"].(string)
			}
		}
		for name, content := range l.puts {
			id, found := listed[name]
			if !found {
				t.Fatalf("acknowledged put %s is not listed after the restart", name)
			}
			if got := ok(bg, t, lead, "get", map[string]any{"id": id})["content"]; got != content {
				t.Fatalf("acknowledged put %s: wrong content after the restart", name)
			}
		}
		for name, seq := range l.counter {
			got := ok(bg, t, lead, "get", map[string]any{"id": listed[name]})["content"].(string)
			if n, s, ok := unseal(got); !ok || n != name || s < seq {
				t.Fatalf("overwritten %s after the restart: sequence %d (whole: %v); want at least the acknowledged %d", name, s, ok, seq)
			}
		}
		// Every accepted message is delivered or queued; every
		// acknowledged reply is held.
		tickets := map[string]map[string]any{}
		for args := map[string]any{}; ; {
			page := ok(bg, t, lead, "fleet_poll", args)
			for _, tk := range page["tickets"].([]any) {
				o := tk.(map[string]any)
				tickets[o["turn_id"].(string)] = o
			}
			next, more := page["next_cursor"].(string)
			if !more || next == "" {
				break
			}
			args = map[string]any{"cursor": next} // more than a page: a fast machine sends more before the kill
		}
		queued := map[string]bool{}
		inTransit, unheard := 0, 0
		for turn := range l.accepted {
			o, found := tickets[turn]
			if !found {
				t.Fatalf("accepted message of turn %s has no ticket after the restart", turn)
			}
			state := o["state"]
			switch {
			case l.replied[turn] != "":
				if o["outcome"] != "reply" || o["content"] != l.replied[turn] {
					t.Fatalf("acknowledged reply of turn %s: ticket %v", turn, o)
				}
			case l.delivered[turn] != "":
				if state != "working" && !(o["outcome"] == "reply" && o["content"] == "reply to "+turn) {
					t.Fatalf("delivered turn %s: ticket %v; want working, or the reply that was in flight", turn, o)
				}
			case state == "queued":
				queued[turn] = true
			case state == "working":
				inTransit++ // marked delivered, the answer to fleet_next lost with the daemon
			default:
				t.Fatalf("turn %s never delivered: ticket %v", turn, o)
			}
		}
		// Members take what was queued, each message once, and nothing
		// they had before.
		for _, m := range []string{"m1", "m2"} {
			cs := connectHTTP(t, d.url, tokens[m])
			for {
				msg := ok(bg, t, cs, "fleet_next", map[string]any{"wait_s": 0})
				turn, _ := msg["turn_id"].(string)
				if turn == "" {
					break
				}
				_, known := l.accepted[turn]
				switch {
				case l.delivered[turn] != "":
					t.Fatalf("%s got turn %s after the restart; %s had it before", m, turn, l.delivered[turn])
				case known && !queued[turn]:
					t.Fatalf("%s got turn %s after the restart, whose ticket was not queued", m, turn)
				case !known:
					unheard++ // accepted, its answer to the lead cut by the kill
				}
				delete(queued, turn)
			}
		}
		if len(queued) != 0 {
			t.Fatalf("queued messages never delivered after the restart: %v", queued)
		}
		// Clear the tickets for the next round.
		for _, tk := range ok(bg, t, lead, "fleet_poll", nil)["tickets"].([]any) {
			if o := tk.(map[string]any); o["state"] == "done" {
				ok(bg, t, lead, "fleet_ack", map[string]any{"ticket": o["ticket"]})
			}
		}
		t.Logf("round %d: %d calls answered, %d broken by the kill; %d puts and %d overwrites acknowledged, %d sends accepted (%d more whose answer the kill cut), %d delivered, %d replies; %d in transit at the kill; %d temporary files left (unseen)",
			round, l.calls, l.broken, len(l.puts), len(l.counter), len(l.accepted), unheard, len(l.delivered), len(l.replied), inTransit, leftovers)
		totals.puts += len(l.puts) + len(l.counter)
		totals.sends += len(l.accepted)
		totals.unheard += unheard
		totals.delivered += len(l.delivered)
		totals.replies += len(l.replied)
		totals.inTransit += inTransit
		totals.leftovers += leftovers
		totals.broken += l.broken
		totals.calls += l.calls
	}
	t.Logf("totals over %d kills: %+v; lost: nothing", *killRounds, totals)
}

// ---- 2. connections dropping mid-call --------------------------------------

// proxyFleet is a daemon whose lead or members are `fleetstate mcp
// --connect` proxy processes, spoken to over stdio.
type proxyFleet struct {
	dir    string
	d      *daemonProc
	tokens map[string]string
}

func newProxyFleet(t *testing.T, args ...string) *proxyFleet {
	t.Helper()
	f := &proxyFleet{dir: t.TempDir()}
	f.tokens = addTokens(t, f.dir, map[string]string{"lead": "lead", "m1": "member"})
	f.d = startDaemon(t, f.dir, args...)
	return f
}

func (f *proxyFleet) proxy(t *testing.T, agent string) *rawProc {
	t.Helper()
	return startRaw(t, []string{"FLEET_TOKEN=" + f.tokens[agent]}, "mcp", "--connect", f.d.url)
}

// TestFaultLeadDropsMidSend: the lead's process dies while its blocking
// send waits; the member's reply, which then has no one to go to, is held
// on the ticket, and the lead finds it when it comes back.
func TestFaultLeadDropsMidSend(t *testing.T) {
	f := newProxyFleet(t)
	bg := context.Background()
	lead := f.proxy(t, "lead")
	member := connectHTTP(t, f.d.url, f.tokens["m1"])
	sent := lead.call("fleet_send", map[string]any{"to": "m1", "content": "job"})
	if msg := ok(bg, t, member, "fleet_next", map[string]any{"wait_s": 10}); msg["content"] != "job" {
		t.Fatalf("fleet_next = %v", msg)
	}
	lead.kill(syscall.SIGKILL)
	if r := <-sent; !r.gone {
		t.Fatalf("the killed lead's send answered: %+v", r)
	}
	// The daemon learns that the lead is gone when it notices the closed
	// connection (a reply before that would go to the dead call: see
	// RELIABILITY.md); wait for it, as the ticket showing in fleet_poll
	// says (it lists no ticket a call is blocked on).
	back := connectHTTP(t, f.d.url, f.tokens["lead"])
	if !fleettest.Until(10*time.Second, 10*time.Millisecond, func() bool {
		ts, _ := ok(bg, t, back, "fleet_poll", nil)["tickets"].([]any)
		return len(ts) == 1
	}) {
		t.Fatal("the daemon never noticed the lead's death")
	}
	// The member's reply is taken at once: nobody waits on it, the ticket
	// holds it.
	rctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	ok(rctx, t, member, "fleet_reply", map[string]any{"content": "the result"})
	all := ok(bg, t, back, "fleet_poll", map[string]any{"wait_s": 10})
	ts := all["tickets"].([]any)
	if len(ts) != 1 {
		t.Fatalf("tickets after the lead came back: %v; want one", all)
	}
	o := ts[0].(map[string]any)
	if o["outcome"] != "reply" || o["content"] != "the result" || o["state"] != "done" {
		t.Fatalf("ticket %v; want the held reply", o)
	}
	ok(bg, t, back, "fleet_ack", map[string]any{"ticket": o["ticket"]})
}

// memberDrop runs a member behind a proxy process into a turn (and, with
// ask, into a question), then ends the proxy with end, and checks that the
// lead learns member_gone before its send's bound.
func memberDrop(t *testing.T, ask bool, end func(p *rawProc)) {
	f := newProxyFleet(t, "--send-timeout", "30s", "--ask-timeout", "30s")
	bg := context.Background()
	lead := connectHTTP(t, f.d.url, f.tokens["lead"])
	member := f.proxy(t, "m1")
	sent := async(bg, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "job"})
	if msg := member.ok(member.call("fleet_next", map[string]any{"wait_s": 10})); msg["content"] != "job" {
		t.Fatalf("fleet_next = %v", msg)
	}
	var ticket any
	if ask {
		asked := member.call("fleet_ask", map[string]any{"question": "which branch?", "default": "main"})
		q := recvWithin(t, sent, 10*time.Second)
		if q["outcome"] != "question" {
			t.Fatalf("send = %v; want the question", q)
		}
		ticket = q["ticket"]
		end(member)
		<-asked
	} else {
		end(member)
	}
	var o map[string]any
	if ask {
		// The daemon sees the ask's request go (the question is withdrawn,
		// the ticket works again) and the stream go (the turn ends), in
		// either order. A poll returns at once while the ticket holds the
		// question, and waits while it is pending.
		o = ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": ticket, "wait_s": 1})
		fleettest.Until(20*time.Second, 0, func() bool {
			if o["state"] == "done" {
				return true
			}
			if o["outcome"] == "question" {
				time.Sleep(10 * time.Millisecond)
			}
			o = ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": ticket, "wait_s": 1})
			return false
		})
	} else {
		// Well before the 30 s bound: the drop, not the bound, ends it.
		o = recvWithin(t, sent, 20*time.Second)
	}
	if o["outcome"] != "failed" || o["reason"] != "member_gone" {
		t.Fatalf("after the member's process ended: %v; want failed, member_gone", o)
	}
	m := ok(bg, t, lead, "fleet_members", nil)["members"].([]any)[0].(map[string]any)
	if m["ready"] != false {
		t.Errorf("member after its process ended: %v; want not ready", m)
	}
	// Back with a new process, the member takes new work.
	back := f.proxy(t, "m1")
	o = ok(bg, t, lead, "fleet_send", map[string]any{"to": "m1", "content": "again", "wait": false})
	if msg := back.ok(back.call("fleet_next", map[string]any{"wait_s": 10})); msg["content"] != "again" {
		t.Fatalf("fleet_next after coming back = %v", msg)
	}
	back.ok(back.call("fleet_reply", map[string]any{"content": "done"}))
	if p := ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": o["ticket"], "wait_s": 10}); p["content"] != "done" {
		t.Fatalf("poll = %v", p)
	}
}

func TestFaultMemberKilledMidTurn(t *testing.T) {
	memberDrop(t, false, func(p *rawProc) { p.kill(syscall.SIGKILL) })
}

func TestFaultMemberKilledMidAsk(t *testing.T) {
	memberDrop(t, true, func(p *rawProc) { p.kill(syscall.SIGKILL) })
}

// TestFaultMemberClientExitsMidTurn: the member's MCP client exits (its
// stdio server's input ends): the proxy closes its session and exits.
func TestFaultMemberClientExitsMidTurn(t *testing.T) {
	memberDrop(t, false, func(p *rawProc) {
		if err := p.closeInput(10 * time.Second); err != nil {
			t.Error(err)
		}
	})
}

// TestFaultMemberPaneDies: a member in a tmux pane whose pane dies while
// it works: the lead's blocked send and a detached ticket both end as
// member_gone, well before their bounds.
func TestFaultMemberPaneDies(t *testing.T) {
	sock := fleettest.TmuxSocket(t)
	dir := t.TempDir()
	// A stand-in for an agent CLI: an idle prompt; told anything, it
	// works for ever.
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf 'READY> '\nread line\necho WORKING on it\nexec sleep 3600\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pane", "other"} {
		args := []string{"-S", sock, "new-session", "-d", "-s", name, "-x", "120", "-y", "30", script}
		if out, err := exec.Command("tmux", args...).CombinedOutput(); err != nil {
			t.Fatalf("tmux: %v: %s", err, out)
		}
	}
	roster := filepath.Join(dir, "roster.json")
	rosterJSON := fmt.Sprintf(`{"tmux_socket": %q, "programs": {"sh": {"working": ["WORKING"], "idle": ["^READY>"]}},
		"agents": [{"name": "lead", "role": "lead"},
		           {"name": "pane", "role": "member", "tmux": "pane:0.0", "program": "sh"},
		           {"name": "other", "role": "member", "tmux": "other:0.0", "program": "sh"}]}`, sock)
	if err := os.WriteFile(roster, []byte(rosterJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	tokens := addTokens(t, state, map[string]string{"lead": "lead", "pane": "member", "other": "member"})
	d := startDaemon(t, state, "--roster", roster, "--send-timeout", "30s")
	bg := context.Background()
	lead := connectHTTP(t, d.url, tokens["lead"])
	for _, m := range []string{"pane", "other"} { // mounted: a call makes each ready
		fails(bg, t, connectHTTP(t, d.url, tokens[m]), "get_session", nil, "ERR_NO_ACTIVE_SESSION")
	}
	sent := async(bg, t, lead, "fleet_send", map[string]any{"to": "pane", "content": "blocking job"})
	detached := ok(bg, t, lead, "fleet_send", map[string]any{"to": "other", "content": "detached job", "wait": false})
	waitWorking := func(target string) {
		t.Helper()
		var out []byte
		if !fleettest.Until(20*time.Second, 50*time.Millisecond, func() bool {
			out, _ = exec.Command("tmux", "-S", sock, "capture-pane", "-p", "-t", target).Output()
			return strings.Contains(string(out), "WORKING")
		}) {
			t.Fatalf("pane %s never started working: %q", target, out)
		}
	}
	waitWorking("pane:0.0")
	waitWorking("other:0.0")
	for _, target := range []string{"pane", "other"} {
		if out, err := exec.Command("tmux", "-S", sock, "kill-session", "-t", target).CombinedOutput(); err != nil {
			t.Fatalf("kill-session %s: %v: %s", target, err, out)
		}
	}
	if o := recvWithin(t, sent, 20*time.Second); o["outcome"] != "failed" || o["reason"] != "member_gone" {
		t.Fatalf("blocking send to a pane that died: %v; want failed, member_gone", o)
	}
	if o := ok(bg, t, lead, "fleet_poll", map[string]any{"ticket": detached["ticket"], "wait_s": 20}); o["outcome"] != "failed" || o["reason"] != "member_gone" {
		t.Fatalf("ticket of a pane that died: %v; want failed, member_gone", o)
	}
}

// ---- 3. several stdio servers on one state directory -----------------------

// TestFaultSharedDirectory runs several `fleetstate mcp` stdio servers on
// one directory, as MCP clients start them, and has each put files, start
// sessions and (in the second phase) clean, all at once, while a reader
// watches current_run.txt. current_run.txt is never torn, the archive loses
// no line and holds no line twice, every acknowledged put is readable until
// a clean, no call fails with an internal error, and the directory is
// consistent at the end.
func TestFaultSharedDirectory(t *testing.T) {
	const servers, rounds = 4, 12
	dir := filepath.Join(t.TempDir(), "state")
	names := map[string]bool{} // session names any server may write
	for s := range servers {
		for r := range rounds {
			names[fmt.Sprintf("s%d-r%d", s, r)] = true
		}
	}
	for _, withCleans := range []bool{false, true} {
		t.Run(map[bool]string{false: "puts and sessions", true: "with cleans"}[withCleans], func(t *testing.T) {
			ctx := context.Background()
			css := make([]*mcp.ClientSession, servers)
			for s := range servers {
				css[s] = connectStdio(t, []string{"FLEET_STATE_DIRECTORY=" + dir, "FLEET_AGENT=", "FLEET_ROLE="})
			}
			ok(ctx, t, css[0], "new_session", map[string]any{"name": "start"})
			first := ok(ctx, t, css[0], "get_session", nil)
			// The reader: current_run.txt is absent or whole, always.
			stop := make(chan struct{})
			var reads, torn int
			var readerDone sync.WaitGroup
			readerDone.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					data, err := os.ReadFile(filepath.Join(dir, "current_run.txt"))
					if err != nil {
						continue
					}
					reads++
					id, name, ok := strings.Cut(string(data), ":::")
					if !ok || len(id) != 36 || !(names[name] || name == "start") {
						torn++
						t.Errorf("current_run.txt read as %q", data)
					}
				}
			})
			type putRec struct{ id, content string }
			var mu sync.Mutex
			created := map[string]string{first["id"].(string): "start"}
			var acked []putRec
			cleans := 0
			var wg sync.WaitGroup
			for s := range servers {
				wg.Go(func() {
					for r := range rounds {
						for i := range 5 {
							content := sealed(fmt.Sprintf("s%d", s), r*10+i, 100)
							out, isErr, err := tryCall(ctx, css[s], "put", map[string]any{"agent_name": fmt.Sprintf("s%d", s), "file_name": fmt.Sprintf("r%d/f%d", r, i), "content": content})
							switch {
							case err != nil:
								t.Errorf("server %d: put: %v", s, err)
								return
							case isErr && (out["error"] == "ERR_INTERNAL" || !withCleans):
								t.Errorf("server %d: put refused: %v", s, out)
							case !isErr:
								mu.Lock()
								acked = append(acked, putRec{out["id"].(string), content})
								mu.Unlock()
							}
						}
						if withCleans && r%4 == 3 && s%2 == 0 {
							out, isErr, err := tryCall(ctx, css[s], "clean_sessions", nil)
							if err != nil || isErr {
								t.Errorf("server %d: clean: %v %v", s, out, err)
							}
							mu.Lock()
							cleans++
							mu.Unlock()
						}
						out, isErr, err := tryCall(ctx, css[s], "new_session", map[string]any{"name": fmt.Sprintf("s%d-r%d", s, r)})
						if err != nil || isErr {
							t.Errorf("server %d: new_session: %v %v", s, out, err)
							return
						}
						mu.Lock()
						created[out["id"].(string)] = fmt.Sprintf("s%d-r%d", s, r)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			close(stop)
			readerDone.Wait()
			cur := ok(ctx, t, css[0], "get_session", nil)
			logData, err := os.ReadFile(filepath.Join(dir, "previous_run_log.txt"))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			var lines []string
			if len(logData) > 0 {
				if logData[len(logData)-1] != '\n' {
					t.Fatalf("archive does not end with a newline: %q", logData)
				}
				lines = strings.Split(strings.TrimSuffix(string(logData), "\n"), "\n")
			}
			seen := map[string]bool{}
			for _, line := range lines {
				id, name, ok := strings.Cut(line, ":::")
				if !ok || created[id] != name {
					t.Fatalf("archive line %q is torn or names no session that was started", line)
				}
				if seen[id] {
					t.Fatalf("archive holds %q twice", line)
				}
				seen[id] = true
			}
			if seen[cur["id"].(string)] {
				t.Fatalf("the current session %v is archived too", cur)
			}
			if !withCleans {
				// No line lost: every session but the current one is archived.
				if len(lines) != len(created)-1 {
					t.Fatalf("archive has %d lines; %d sessions were started, so want %d", len(lines), len(created), len(created)-1)
				}
				for _, p := range acked {
					if got := ok(ctx, t, css[1], "get", map[string]any{"id": p.id}); got["content"] != p.content {
						t.Fatalf("acknowledged put %s reads %v", p.id, got)
					}
				}
			} else if cleans == 0 {
				t.Fatal("no clean ran")
			}
			// Consistent directory: only the layout's names and whole files.
			// A put that read the current session just before a clean
			// lands after it, in a folder of its own: counted, not an
			// error (the file is whole and readable by its ID).
			orphans := 0
			err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				if e.IsDir() && filepath.Dir(rel) == "." && len(rel) == 36 && !seen[rel] && rel != cur["id"] {
					if _, known := created[rel]; !known {
						t.Errorf("session folder %s of no session that was started", rel)
					}
					if withCleans {
						orphans++
					}
				}
				if rel == "." || strings.HasPrefix(rel, ".fleetstate") || rel == "current_run.txt" || rel == "previous_run_log.txt" {
					return nil
				}
				if strings.HasPrefix(e.Name(), ".fleetstate-tmp-") {
					t.Errorf("temporary file left: %s", rel)
				}
				if e.Type().IsRegular() {
					data, err := os.ReadFile(p)
					if err != nil {
						return err
					}
					if _, _, ok := unseal(string(data)); !ok {
						t.Errorf("torn file %s", rel)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d servers: %d sessions started, %d cleans, %d puts acknowledged, %d archive lines, %d session folders written after a clean; current_run.txt read %d times, torn %d times",
				servers, len(created), cleans, len(acked), len(lines), orphans, reads, torn)
			ok(ctx, t, css[0], "clean_sessions", nil)
		})
	}
}

// ---- 5. clients that never read their responses ----------------------------

// modernRequest returns the headers and body of a JSON-RPC request under
// protocol 2026-07-28, where every request stands alone.
func modernRequest(id int, method string, params map[string]any) (map[string]string, []byte) {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "0"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	h := map[string]string{
		"Content-Type":         "application/json",
		"Accept":               "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28",
		"Mcp-Method":           method,
	}
	if name, ok := params["name"].(string); ok {
		h["Mcp-Name"] = name
	}
	return h, body
}

// stuckConn opens a TCP connection to the daemon and writes n pipelined
// requests on it, and never reads a byte of what comes back.
func stuckConn(t *testing.T, url, token string, n int, method string, params map[string]any) net.Conn {
	t.Helper()
	host := strings.TrimPrefix(strings.TrimSuffix(url, "/mcp"), "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var b strings.Builder
	for i := range n {
		h, body := modernRequest(i+1, method, params)
		fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n", host, token, len(body))
		for k, v := range h {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
		b.WriteString("\r\n")
		b.Write(body)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestFaultStuckHTTPClients: clients that ask for large files and never
// read the answers hold their own connections, and nothing else: the other
// agents' calls, blocking ones included, go on within their bounds.
func TestFaultStuckHTTPClients(t *testing.T) {
	f := newFleet(t)
	bg := context.Background()
	ok(bg, t, f.lead, "new_session", map[string]any{"name": "s"})
	big := strings.Repeat("x", 4<<20)
	id := ok(bg, t, f.lead, "put", map[string]any{"agent_name": "lead", "file_name": "big.txt", "content": big})["id"].(string)
	var stuck []net.Conn
	for range 6 {
		stuck = append(stuck, stuckConn(t, f.d.url, f.tokens["lead"], 4, "tools/call", map[string]any{"name": "get", "arguments": map[string]any{"id": id}}))
	}
	// A stuck member too, in the middle of a blocking call it will never
	// read the end of.
	stuck = append(stuck, stuckConn(t, f.d.url, f.tokens["m2"], 1, "tools/call", map[string]any{"name": "fleet_next", "arguments": map[string]any{"wait_s": 1}}))

	// A bound on the whole, not a speed: the stuck calls encode 24 copies
	// of 4 MiB at once, which under -race on a loaded machine of two
	// cores took the healthy calls past 20 s (both suites of a run under
	// load, at once); alone they take 5 to 7 s.
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	for i := range 5 {
		sent := async(ctx, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": fmt.Sprintf("job %d", i)})
		if msg := ok(ctx, t, f.m1, "fleet_next", map[string]any{"wait_s": 10}); msg["content"] != fmt.Sprintf("job %d", i) {
			t.Fatalf("fleet_next = %v", msg)
		}
		ok(ctx, t, f.m1, "fleet_reply", map[string]any{"content": "done"})
		if o := recvWithin(t, sent, 10*time.Second); o["outcome"] != "reply" {
			t.Fatalf("send = %v", o)
		}
		small := ok(ctx, t, f.m1, "put", map[string]any{"agent_name": "m1", "file_name": fmt.Sprintf("f%d", i), "content": "small"})
		if got := ok(ctx, t, f.lead, "get", map[string]any{"id": small["id"]}); got["content"] != "small" {
			t.Fatalf("get = %v", got)
		}
	}
	// A healthy client reads the large file while the others are stuck.
	if got := ok(ctx, t, f.m1, "get", map[string]any{"id": id}); len(got["content"].(string)) != len(big) {
		t.Fatal("the large file came back short")
	}
	for _, c := range stuck {
		c.Close()
	}
	ok(ctx, t, f.lead, "fleet_members", nil)
}

// TestFaultStuckStdioClient: a stdio server whose client never reads its
// output blocks alone; another server on the same directory starts
// sessions, puts, reads and cleans meanwhile.
func TestFaultStuckStdioClient(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	bg := context.Background()
	healthy := connectStdio(t, []string{"FLEET_STATE_DIRECTORY=" + dir, "FLEET_AGENT=", "FLEET_ROLE="})
	ok(bg, t, healthy, "new_session", map[string]any{"name": "s"})
	big := strings.Repeat("y", 4<<20)
	id := ok(bg, t, healthy, "put", map[string]any{"agent_name": "a", "file_name": "big", "content": big})["id"].(string)

	stuck := startRawProc(t, nil, false, "mcp", "--dir", dir)
	stuck.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stuck","version":"1"}}}`)
	stuck.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// Asked for 40 copies of 4 MiB, and never reading them: the server's
	// output pipe (64 KiB) fills at once and every worker blocks writing.
	for i := 1; i <= 40; i++ {
		stuck.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"get","arguments":{"id":%q}}}`, i, id))
	}

	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	for i := range 10 {
		ok(ctx, t, healthy, "new_session", map[string]any{"name": fmt.Sprintf("s%d", i)})
		p := ok(ctx, t, healthy, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": "x"})
		ok(ctx, t, healthy, "get", map[string]any{"id": p["id"]})
	}
	ok(ctx, t, healthy, "clean_sessions", nil)
	if stuck.cmd.ProcessState != nil {
		t.Fatalf("the stuck server exited: %v", stuck.cmd.ProcessState)
	}
}
