package mcpadapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// The callers of the tests, from the test kit.
var (
	lead  = adaptertest.Lead
	lead2 = adaptertest.Lead2
	scout = adaptertest.Scout
	miner = adaptertest.Miner
	anon  = adaptertest.Anon
)

// envOpts configure newEnv. The zero value is a store on a MemMapFs at
// /state with a rendezvous of default bounds and members scout and miner.
type envOpts struct {
	fs      afero.Fs // nil: afero.NewMemMapFs()
	dir     string   // "": /state
	store   *fleetstate.Options
	rv      *fleetstate.RendezvousOptions
	adapter *mcpadapter.Options
	members []string // nil: scout and miner
	noFleet bool     // serve the store tools only
}

// env is an adapter served by an MCP server and reached through mcp-go's
// in-process client, whose tools the Checker calls and checks.
type env struct {
	*adaptertest.Checker
	store *fleetstate.Store
	rv    *fleetstate.Rendezvous

	notifyMu sync.Mutex
	notify   func(mcp.JSONRPCNotification) // guarded by notifyMu
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	if o.fs == nil {
		o.fs = afero.NewMemMapFs()
	}
	if o.dir == "" {
		o.dir = "/state"
	}
	if o.members == nil {
		o.members = []string{scout.Agent, miner.Agent}
	}
	st, err := fleetstate.Open(o.fs, o.dir, o.store)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	e := &env{store: st}
	if !o.noFleet {
		rv, err := fleetstate.NewRendezvous(st, o.rv)
		if err != nil {
			t.Fatalf("NewRendezvous: %v", err)
		}
		t.Cleanup(func() { rv.Close() })
		for _, m := range o.members {
			if err := rv.AddMember(m, nil); err != nil {
				t.Fatalf("AddMember(%q): %v", m, err)
			}
		}
		e.rv = rv
	}
	srv := mcpadapter.New(st, e.rv, o.adapter).NewServer("fleetstate", "test")
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		t.Fatalf("NewInProcessClient: %v", err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpadapter-test", Version: "0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		e.notifyMu.Lock()
		f := e.notify
		e.notifyMu.Unlock()
		if f != nil {
			f(n)
		}
	})
	e.Checker = adaptertest.NewChecker(t, st.Dir(), c)
	return e
}

// --- store tools ------------------------------------------------------

func TestStoreToolsShapes(t *testing.T) {
	e := newEnv(t, envOpts{})

	sess := e.Ok(anon, "new_session", map[string]any{"name": "refactor"})
	adaptertest.WantKeys(t, "new_session", sess, "id")
	sid := adaptertest.Str(sess, "id")
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(sid) {
		t.Errorf("new_session id %q; want a lower-case UUID", sid)
	}

	cur := e.Ok(scout, "get_session", nil)
	adaptertest.WantKeys(t, "get_session", cur, "id", "name")
	if cur["id"] != sid || cur["name"] != "refactor" {
		t.Errorf("get_session %v; want id %s name refactor", cur, sid)
	}

	put := e.Ok(scout, "put", map[string]any{"agent_name": "scout", "file_name": "notes/plan.md", "content": "step 1"})
	adaptertest.WantKeys(t, "put", put, "id")
	fid := adaptertest.Str(put, "id")
	if want := "fsm::file::" + sid + "::scout::notes/plan.md"; fid != want {
		t.Errorf("put id %q; want %q", fid, want)
	}
	e.Ok(lead, "put", map[string]any{"agent_name": "miner", "file_name": "a::b.txt", "content": "", "overwrite": false})

	got := e.Ok(miner, "get", map[string]any{"id": fid})
	adaptertest.WantKeys(t, "get", got, "content")
	if got["content"] != "step 1" {
		t.Errorf("get content %q; want %q", got["content"], "step 1")
	}

	over := e.Ok(anon, "put", map[string]any{"agent_name": "scout", "file_name": "notes/plan.md", "content": "step 2", "overwrite": true})
	if over["id"] != fid {
		t.Errorf("overwrite id %v; want %s", over["id"], fid)
	}
	if got := e.Ok(anon, "get", map[string]any{"id": fid}); got["content"] != "step 2" {
		t.Errorf("get after overwrite %q; want %q", got["content"], "step 2")
	}

	for _, args := range []any{nil, map[string]any{}, map[string]any{"session_id": sid}} {
		l := e.Ok(anon, "list", args)
		adaptertest.WantKeys(t, "list", l, "files")
		files, _ := l["files"].([]any)
		if len(files) != 2 {
			t.Fatalf("list(%v): %d files; want 2: %v", args, len(files), l)
		}
		for _, f := range files {
			fm, _ := f.(map[string]any)
			adaptertest.WantKeys(t, "list entry", fm, "id", "agent_name", "file_name", "size", "modified")
			if _, err := time.Parse(time.RFC3339Nano, adaptertest.Str(fm, "modified")); err != nil {
				t.Errorf("modified %q: %v", fm["modified"], err)
			}
		}
		first := files[0].(map[string]any)
		if first["agent_name"] != "miner" || first["file_name"] != "a::b.txt" || first["size"] != 0.0 {
			t.Errorf("first entry %v; want miner's a::b.txt of size 0", first)
		}
		second := files[1].(map[string]any)
		if second["id"] != fid || second["size"] != float64(len("step 2")) {
			t.Errorf("second entry %v; want %s of size 6", second, fid)
		}
	}
	l := e.Ok(anon, "list", map[string]any{"agent_name": "scout"})
	if files, _ := l["files"].([]any); len(files) != 1 {
		t.Errorf("list agent scout: %v; want one file", l)
	}
	l = e.Ok(anon, "list", map[string]any{"agent_name": "nobody"})
	if files, ok := l["files"].([]any); !ok || len(files) != 0 {
		t.Errorf("list agent nobody: %v; want files: []", l)
	}

	// A new session archives the old one; its files stay readable by ID.
	e.Ok(lead, "new_session", map[string]any{"name": "second"})
	if got := e.Ok(anon, "get", map[string]any{"id": fid}); got["content"] != "step 2" {
		t.Errorf("get of an archived session's file: %v", got)
	}
	if l := e.Ok(anon, "list", nil); len(l["files"].([]any)) != 0 {
		t.Errorf("list of a new session: %v; want no files", l)
	}

	clean := e.Ok(anon, "clean_sessions", nil)
	adaptertest.WantKeys(t, "clean_sessions", clean, "success")
	if clean["success"] != true {
		t.Errorf("clean_sessions %v; want success true", clean)
	}
	e.Fail(anon, "get_session", nil, fleetstate.CodeNoActiveSession)
}

// TestStoreOnlyAdapter: without a rendezvous the fleet tools are not
// served at all.
func TestStoreOnlyAdapter(t *testing.T) {
	e := newEnv(t, envOpts{noFleet: true})
	var names []string
	for n := range e.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{"clean_sessions", "get", "get_session", "list", "new_session", "put"}
	if !slices.Equal(names, want) {
		t.Errorf("tools %v; want %v", names, want)
	}
	e.Ok(anon, "new_session", map[string]any{"name": "s"})
	e.Ok(anon, "clean_sessions", nil)
}

// --- error codes ------------------------------------------------------

// TestErrorCodes provokes every code a tool can return, through the
// tools, and checks the shape of each.
func TestErrorCodes(t *testing.T) {
	bg := context.Background()
	type setup struct {
		e   *env
		sid string // the current session
		fid string // a file of scout in it
	}
	start := func(t *testing.T, o envOpts) setup {
		e := newEnv(t, o)
		sid := adaptertest.Str(e.Ok(lead, "new_session", map[string]any{"name": "s"}), "id")
		fid := adaptertest.Str(e.Ok(scout, "put", map[string]any{"agent_name": "scout", "file_name": "f.txt", "content": "x"}), "id")
		return setup{e, sid, fid}
	}
	// openTurn hands scout a message and returns the lead's blocked send
	// and the message.
	openTurn := func(t *testing.T, e *env) (chan adaptertest.Reply, map[string]any) {
		ch := make(chan adaptertest.Reply, 1)
		go func() { ch <- e.Do(bg, lead, "fleet_send", map[string]any{"to": "scout", "content": "work"}, nil) }()
		msg := e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))
		return ch, msg
	}
	finish := func(e *env, ch chan adaptertest.Reply) {
		e.Ok(scout, "fleet_reply", map[string]any{"content": "done"})
		adaptertest.WantOutcome(e.T, e.OkOf(e.Recv(ch)), "reply", "turn_id", "from", "content")
	}

	tests := []struct {
		code fleetstate.Code
		run  func(t *testing.T)
	}{
		{fleetstate.CodeNoActiveSession, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.Fail(anon, "get_session", nil, fleetstate.CodeNoActiveSession)
			e.Fail(anon, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": "x"}, fleetstate.CodeNoActiveSession)
			e.Fail(anon, "list", nil, fleetstate.CodeNoActiveSession)
		}},
		{fleetstate.CodeFileExists, func(t *testing.T) {
			s := start(t, envOpts{})
			s.e.Fail(scout, "put", map[string]any{"agent_name": "scout", "file_name": "f.txt", "content": "y"}, fleetstate.CodeFileExists)
			s.e.Fail(scout, "put", map[string]any{"agent_name": "scout", "file_name": "f.txt", "content": "y", "overwrite": false}, fleetstate.CodeFileExists)
			if got := s.e.Ok(anon, "get", map[string]any{"id": s.fid}); got["content"] != "x" {
				t.Errorf("content after a refused put: %v; want x", got)
			}
		}},
		{fleetstate.CodeCanOnlyRetrieveFiles, func(t *testing.T) {
			s := start(t, envOpts{})
			for _, id := range []string{"", "notes.md", "fsm::file::", "fsm::session::" + s.sid, "fsm::file::" + s.sid + "::scout"} {
				s.e.Fail(anon, "get", map[string]any{"id": id}, fleetstate.CodeCanOnlyRetrieveFiles)
			}
		}},
		{fleetstate.CodeSessionNotValid, func(t *testing.T) {
			s := start(t, envOpts{})
			other := "fsm::file::00000000-0000-4000-8000-000000000000::scout::f.txt"
			s.e.Fail(anon, "get", map[string]any{"id": other}, fleetstate.CodeSessionNotValid)
			s.e.Fail(anon, "list", map[string]any{"session_id": "00000000-0000-4000-8000-000000000000"}, fleetstate.CodeSessionNotValid)
			s.e.Fail(anon, "list", map[string]any{"session_id": "not-a-uuid"}, fleetstate.CodeSessionNotValid)
		}},
		{fleetstate.CodeAgentNotValid, func(t *testing.T) {
			s := start(t, envOpts{})
			s.e.Fail(anon, "get", map[string]any{"id": "fsm::file::" + s.sid + "::nobody::f.txt"}, fleetstate.CodeAgentNotValid)
		}},
		{fleetstate.CodeFileNotFound, func(t *testing.T) {
			s := start(t, envOpts{})
			s.e.Fail(anon, "get", map[string]any{"id": "fsm::file::" + s.sid + "::scout::missing.txt"}, fleetstate.CodeFileNotFound)
		}},
		{fleetstate.CodeInvalidAgentName, func(t *testing.T) {
			s := start(t, envOpts{})
			for _, name := range []string{"", "..", "a/b", "a::b", "a\x00b", strings.Repeat("a", 129)} {
				s.e.Fail(anon, "put", map[string]any{"agent_name": name, "file_name": "f", "content": "x"}, fleetstate.CodeInvalidAgentName)
			}
			s.e.Fail(anon, "list", map[string]any{"agent_name": "../etc"}, fleetstate.CodeInvalidAgentName)
		}},
		{fleetstate.CodeInvalidFileName, func(t *testing.T) {
			s := start(t, envOpts{})
			for _, name := range []string{"", "/etc/passwd", "../x", "a//b", "a/./b", `a\b`, "a\nb", ".fleetstate-tmp-x"} {
				s.e.Fail(anon, "put", map[string]any{"agent_name": "scout", "file_name": name, "content": "x"}, fleetstate.CodeInvalidFileName)
			}
		}},
		{fleetstate.CodeInvalidSessionName, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.Fail(anon, "new_session", map[string]any{"name": ""}, fleetstate.CodeInvalidSessionName)
			e.Fail(anon, "new_session", map[string]any{"name": "a\x01b"}, fleetstate.CodeInvalidSessionName)
		}},
		{fleetstate.CodeContentTooLarge, func(t *testing.T) {
			s := start(t, envOpts{store: &fleetstate.Options{MaxContentSize: 8}})
			big := strings.Repeat("x", 9)
			s.e.Fail(scout, "put", map[string]any{"agent_name": "scout", "file_name": "big", "content": big}, fleetstate.CodeContentTooLarge)
			s.e.Fail(lead, "fleet_send", map[string]any{"to": "scout", "content": big, "wait": false}, fleetstate.CodeContentTooLarge)
			ch, _ := openTurn(t, s.e)
			s.e.Fail(scout, "fleet_reply", map[string]any{"content": big}, fleetstate.CodeContentTooLarge)
			finish(s.e, ch)
		}},
		{fleetstate.CodePathConflict, func(t *testing.T) {
			s := start(t, envOpts{})
			s.e.Fail(scout, "put", map[string]any{"agent_name": "scout", "file_name": "f.txt/inner", "content": "x"}, fleetstate.CodePathConflict)
			s.e.Ok(scout, "put", map[string]any{"agent_name": "scout", "file_name": "dir/inner", "content": "x"})
			s.e.Fail(scout, "put", map[string]any{"agent_name": "scout", "file_name": "dir", "content": "x", "overwrite": true}, fleetstate.CodePathConflict)
		}},
		{fleetstate.CodeNotPermitted, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.Fail(scout, "fleet_send", map[string]any{"to": "miner", "content": "x"}, fleetstate.CodeNotPermitted)
			// A turn opened by another lead is not this lead's to answer.
			ch, msg := openTurn(t, e)
			e.Fail(lead2, "fleet_send", map[string]any{"turn_id": msg["turn_id"], "content": "x"}, fleetstate.CodeNotPermitted)
			finish(e, ch)
		}},
		{fleetstate.CodeUnknownMember, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.Fail(lead, "fleet_send", map[string]any{"to": "ghost", "content": "x"}, fleetstate.CodeUnknownMember)
			e.Fail(lead, "fleet_send", map[string]any{"to": "ghost", "content": "x", "wait": false}, fleetstate.CodeUnknownMember)
			ghost := mcpadapter.Identity{Agent: "ghost", Role: mcpadapter.RoleMember}
			e.Fail(ghost, "fleet_next", adaptertest.WaitArgs(0), fleetstate.CodeUnknownMember)
			e.Fail(ghost, "fleet_reply", map[string]any{"content": "x"}, fleetstate.CodeUnknownMember)
			e.Fail(ghost, "fleet_ask", map[string]any{"question": "x"}, fleetstate.CodeUnknownMember)
		}},
		{fleetstate.CodeUnknownTurn, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.Fail(lead, "fleet_send", map[string]any{"turn_id": "turn-nope", "content": "x"}, fleetstate.CodeUnknownTurn)
		}},
		{fleetstate.CodeUnknownTicket, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.Fail(lead, "fleet_poll", map[string]any{"ticket": "ticket-nope"}, fleetstate.CodeUnknownTicket)
			e.Fail(lead, "fleet_ack", map[string]any{"ticket": "ticket-nope"}, fleetstate.CodeUnknownTicket)
			// Another lead's ticket is unknown to this one.
			tk := adaptertest.Str(e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "x", "wait": false}), "ticket")
			e.Fail(lead2, "fleet_poll", map[string]any{"ticket": tk}, fleetstate.CodeUnknownTicket)
			e.Fail(lead2, "fleet_ack", map[string]any{"ticket": tk}, fleetstate.CodeUnknownTicket)
		}},
		{fleetstate.CodeNoOpenTurn, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.Fail(scout, "fleet_reply", map[string]any{"content": "x"}, fleetstate.CodeNoOpenTurn)
			e.Fail(scout, "fleet_ask", map[string]any{"question": "x"}, fleetstate.CodeNoOpenTurn)
		}},
		{fleetstate.CodeNoPendingQuestion, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			ch, msg := openTurn(t, e)
			e.Fail(lead, "fleet_send", map[string]any{"turn_id": msg["turn_id"], "content": "x"}, fleetstate.CodeNoPendingQuestion)
			finish(e, ch)
		}},
		{fleetstate.CodeQuestionPending, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			ch, _ := openTurn(t, e)
			ask := e.Async(bg, scout, "fleet_ask", map[string]any{"question": "which?"}, nil)
			q := adaptertest.WantOutcome(t, e.OkOf(e.Recv(ch)), "question", "turn_id", "ticket", "from", "content", "state")
			e.Fail(scout, "fleet_ask", map[string]any{"question": "again?"}, fleetstate.CodeQuestionPending)
			ans := e.Async(bg, lead, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "main"}, nil)
			if got := e.OkOf(e.Recv(ask)); got["answer"] != "main" {
				t.Errorf("answer %v; want main", got)
			}
			e.Ok(scout, "fleet_reply", map[string]any{"content": "done"})
			adaptertest.WantOutcome(t, e.OkOf(e.Recv(ans)), "reply", "turn_id", "from", "content")
		}},
		{fleetstate.CodeTicketOpen, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			tk := adaptertest.Str(e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "x", "wait": false}), "ticket")
			e.Fail(lead, "fleet_ack", map[string]any{"ticket": tk}, fleetstate.CodeTicketOpen)
			e.Ok(scout, "fleet_next", adaptertest.WaitArgs(0))
			e.Fail(lead, "fleet_ack", map[string]any{"ticket": tk}, fleetstate.CodeTicketOpen)
		}},
		{fleetstate.CodeInvalidArgument, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.Fail(lead, "fleet_send", map[string]any{"to": "scout", "content": ""}, fleetstate.CodeInvalidArgument)
			e.Fail(lead, "fleet_send", map[string]any{"extra": 1}, fleetstate.CodeInvalidArgument)
			e.Fail(scout, "fleet_ask", map[string]any{"question": ""}, fleetstate.CodeInvalidArgument)
		}},
		{fleetstate.CodeClosed, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.rv.Close()
			e.Fail(scout, "fleet_next", adaptertest.WaitArgs(0), fleetstate.CodeClosed)
			e.Fail(lead, "fleet_send", map[string]any{"to": "scout", "content": "x"}, fleetstate.CodeClosed)
			e.Fail(lead, "fleet_send", map[string]any{"turn_id": "turn-x", "content": "x"}, fleetstate.CodeClosed)
			e.Fail(lead, "clean_sessions", nil, fleetstate.CodeClosed)
		}},
	}
	for _, tc := range tests {
		t.Run(string(tc.code), tc.run)
	}
}

// TestNoHostPathInMessages provokes errors of a store kept on the
// operating system and checks that no message names where it lives.
func TestNoHostPathInMessages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "host-state-dir")
	e := newEnv(t, envOpts{fs: afero.NewOsFs(), dir: dir, store: &fleetstate.Options{NoGitIgnore: true, MaxContentSize: 64}})
	if e.Dir != dir {
		t.Fatalf("store dir %q; want %q", e.Dir, dir)
	}
	var msgs []string
	fail := func(id mcpadapter.Identity, tool string, args any, code fleetstate.Code) {
		t.Helper()
		msgs = append(msgs, e.Fail(id, tool, args, code))
	}
	fail(anon, "get_session", nil, fleetstate.CodeNoActiveSession)
	fail(anon, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": "x"}, fleetstate.CodeNoActiveSession)
	sid := adaptertest.Str(e.Ok(anon, "new_session", map[string]any{"name": "s"}), "id")
	e.Ok(scout, "put", map[string]any{"agent_name": "scout", "file_name": "f.txt", "content": "x"})
	fail(scout, "put", map[string]any{"agent_name": "scout", "file_name": "f.txt", "content": "x"}, fleetstate.CodeFileExists)
	fail(scout, "put", map[string]any{"agent_name": "scout", "file_name": "f.txt/g", "content": "x"}, fleetstate.CodePathConflict)
	e.Ok(scout, "put", map[string]any{"agent_name": "scout", "file_name": "d/g", "content": "x"})
	fail(scout, "put", map[string]any{"agent_name": "scout", "file_name": "d", "content": "x", "overwrite": true}, fleetstate.CodePathConflict)
	fail(scout, "put", map[string]any{"agent_name": "scout", "file_name": "../../etc/passwd", "content": "x"}, fleetstate.CodeInvalidFileName)
	fail(scout, "put", map[string]any{"agent_name": "scout", "file_name": "big", "content": strings.Repeat("x", 65)}, fleetstate.CodeContentTooLarge)
	fail(anon, "get", map[string]any{"id": "fsm::file::" + sid + "::scout::nope"}, fleetstate.CodeFileNotFound)
	fail(anon, "get", map[string]any{"id": "fsm::file::" + sid + "::nobody::nope"}, fleetstate.CodeAgentNotValid)
	fail(anon, "get", map[string]any{"id": "fsm::file::00000000-0000-4000-8000-000000000000::a::b"}, fleetstate.CodeSessionNotValid)
	fail(anon, "get", map[string]any{"id": "fsm::file::" + sid + "::scout"}, fleetstate.CodeCanOnlyRetrieveFiles)

	// A symbolic link inside the state directory is not followed.
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, sid, "linked")); err != nil {
		t.Fatal(err)
	}
	fail(anon, "put", map[string]any{"agent_name": "linked", "file_name": "f", "content": "x"}, fleetstate.CodePathEscape)
	fail(anon, "get", map[string]any{"id": "fsm::file::" + sid + "::linked::f"}, fleetstate.CodePathEscape)

	// The fleet tools' failures, and one of the rendezvous's disk.
	fail(lead, "fleet_send", map[string]any{"to": "ghost", "content": "x"}, fleetstate.CodeUnknownMember)
	fail(lead, "fleet_poll", map[string]any{"ticket": "ticket-nope"}, fleetstate.CodeUnknownTicket)
	fail(scout, "fleet_reply", map[string]any{"content": "x"}, fleetstate.CodeNoOpenTurn)
	rvDir := filepath.Join(dir, ".fleetstate", "rendezvous")
	if err := os.RemoveAll(rvDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rvDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fail(lead, "fleet_send", map[string]any{"to": "scout", "content": "x", "wait": false}, fleetstate.CodeInternal)

	// An unexpected file-system failure: current_run.txt is a directory.
	cur := filepath.Join(dir, "current_run.txt")
	if err := os.Remove(cur); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(cur, 0o700); err != nil {
		t.Fatal(err)
	}
	fail(anon, "get_session", nil, fleetstate.CodeInternal)
	fail(anon, "list", nil, fleetstate.CodeInternal)
	fail(anon, "new_session", map[string]any{"name": "x"}, fleetstate.CodeInternal)

	for _, m := range msgs {
		if strings.Contains(m, dir) || strings.Contains(m, filepath.Dir(dir)) || strings.Contains(m, outside) {
			t.Errorf("message %q names a host path (%s)", m, dir)
		}
	}
	if len(msgs) < 18 {
		t.Errorf("checked %d messages; the test lost some", len(msgs))
	}
}

// --- schema violations ------------------------------------------------

func TestSchemaViolations(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.Ok(lead, "new_session", map[string]any{"name": "s"})
	tests := []struct {
		name string
		id   mcpadapter.Identity
		tool string
		args any
	}{
		{"unknown argument", anon, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": "x", "mode": "0644"}},
		{"unknown argument on a tool without arguments", anon, "get_session", map[string]any{"x": 1}},
		{"argument in another case", anon, "put", map[string]any{"agent_name": "a", "file_name": "f", "Content": "x"}},
		{"argument in upper case", anon, "get", map[string]any{"ID": "fsm::file::x::y::z"}},
		{"overwrite not a boolean", anon, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": "x", "overwrite": "yes"}},
		{"content not a string", anon, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": 42}},
		{"content an object", anon, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": map[string]any{"a": 1}}},
		{"required argument null", anon, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": nil}},
		{"optional argument null", anon, "put", map[string]any{"agent_name": "a", "file_name": "f", "content": "x", "overwrite": nil}},
		{"missing required", anon, "put", map[string]any{"agent_name": "a", "file_name": "f"}},
		{"missing all required", anon, "get", map[string]any{}},
		{"no arguments at all", anon, "new_session", nil},
		{"wait_s a string", scout, "fleet_next", map[string]any{"wait_s": "10"}},
		{"wait_s negative", scout, "fleet_next", map[string]any{"wait_s": -1}},
		{"poll wait_s negative", lead, "fleet_poll", map[string]any{"wait_s": -0.5}},
		{"poll wait_s a boolean", lead, "fleet_poll", map[string]any{"wait_s": true}},
		{"arguments an array", anon, "list", []any{"a"}},
		{"arguments a string", anon, "list", "session"},
		{"arguments a number", anon, "get_session", 7},
		{"fleet_send both to and turn_id", lead, "fleet_send", map[string]any{"to": "scout", "turn_id": "turn-x", "content": "x"}},
		{"fleet_send neither to nor turn_id", lead, "fleet_send", map[string]any{"content": "x"}},
		{"fleet_send turn_id with wait", lead, "fleet_send", map[string]any{"turn_id": "turn-x", "content": "x", "wait": true}},
		{"fleet_send turn_id with wait false", lead, "fleet_send", map[string]any{"turn_id": "turn-x", "content": "x", "wait": false}},
		{"fleet_send wait a string", lead, "fleet_send", map[string]any{"to": "scout", "content": "x", "wait": "false"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.T = t
			defer func() { e.T = nil }()
			msg := e.Fail(tc.id, tc.tool, tc.args, fleetstate.CodeInvalidArgument)
			if !strings.Contains(msg, "argument") {
				t.Errorf("message %q does not say which argument is wrong", msg)
			}
		})
	}
	e.T = t
	// Nothing was written by the refused calls, and scout took no message.
	if l := e.Ok(anon, "list", nil); len(l["files"].([]any)) != 0 {
		t.Errorf("files after refused puts: %v", l)
	}
	if m := e.Ok(lead, "fleet_members", nil); m["members"].([]any)[1].(map[string]any)["queued"] != 0.0 {
		t.Errorf("members after refused sends: %v", m)
	}
}

// TestRoleBeforeArguments: a caller without the role gets
// ERR_NOT_PERMITTED whatever it sent.
func TestRoleBeforeArguments(t *testing.T) {
	e := newEnv(t, envOpts{})
	garbage := []any{
		nil,
		map[string]any{"bogus": true},
		map[string]any{"to": 1, "turn_id": 2, "wait": "x"},
		[]any{1, 2},
		"x",
	}
	calls := []struct {
		id   mcpadapter.Identity
		tool string
	}{
		{scout, "fleet_send"}, {scout, "fleet_poll"}, {scout, "fleet_ack"}, {scout, "fleet_members"},
		{scout, "new_session"}, {scout, "clean_sessions"},
		{lead, "fleet_next"}, {lead, "fleet_reply"}, {lead, "fleet_ask"},
		{anon, "fleet_send"}, {anon, "fleet_next"},
	}
	for _, c := range calls {
		for _, args := range garbage {
			t.Run(fmt.Sprintf("%s/%s/%v", c.id.Agent, c.tool, args), func(t *testing.T) {
				e.T = t
				defer func() { e.T = nil }()
				e.Fail(c.id, c.tool, args, fleetstate.CodeNotPermitted)
			})
		}
	}
}

// --- flows ------------------------------------------------------------

// TestBlockingSendReply: the lead blocks in fleet_send while the member
// takes the message with fleet_next and answers with fleet_reply.
func TestBlockingSendReply(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	send := e.Async(ctx, lead, "fleet_send", map[string]any{"to": "scout", "content": "fix the flaky test"}, nil)

	msg := e.OkOf(e.Recv(e.Async(ctx, scout, "fleet_next", adaptertest.WaitArgs(10), nil)))
	adaptertest.WantKeys(t, "fleet_next", msg, "turn_id", "from", "content")
	if msg["from"] != "lead" || msg["content"] != "fix the flaky test" || !strings.HasPrefix(adaptertest.Str(msg, "turn_id"), "turn-") {
		t.Errorf("fleet_next %v; want the lead's message with a turn", msg)
	}
	rep := e.Ok(scout, "fleet_reply", map[string]any{"content": "done: 3 files"})
	adaptertest.WantKeys(t, "fleet_reply", rep, "ok")
	if rep["ok"] != true {
		t.Errorf("fleet_reply %v; want ok true", rep)
	}
	out := adaptertest.WantOutcome(t, e.OkOf(e.Recv(send)), "reply", "turn_id", "from", "content")
	if out["content"] != "done: 3 files" || out["from"] != "scout" || out["turn_id"] != msg["turn_id"] {
		t.Errorf("outcome %v; want scout's reply in turn %v", out, msg["turn_id"])
	}
	// The blocking send got the outcome; its ticket holds it until the
	// lead's next call (here the poll shows it), and is released then.
	polled := e.Ok(lead, "fleet_poll", nil)
	adaptertest.WantKeys(t, "fleet_poll", polled, "tickets")
	if ts, ok := polled["tickets"].([]any); !ok || len(ts) != 1 {
		t.Errorf("tickets after a blocking send: %v; want its outcome held", polled)
	}
	e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "next", "wait": false})
	e.Fail(lead, "fleet_poll", map[string]any{"ticket": out["ticket"]}, fleetstate.CodeUnknownTicket)
	e.Fail(scout, "fleet_reply", map[string]any{"content": "again"}, fleetstate.CodeNoOpenTurn)
}

// TestClarification: the member asks mid-turn; the lead answers by turn
// ID and then gets the reply.
func TestClarification(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	send := e.Async(ctx, lead, "fleet_send", map[string]any{"to": "scout", "content": "release it"}, nil)
	msg := e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))

	ask := e.Async(ctx, scout, "fleet_ask", map[string]any{"question": "which branch?", "default": "main"}, nil)
	q := adaptertest.WantOutcome(t, e.OkOf(e.Recv(send)), "question", "turn_id", "ticket", "from", "content", "state")
	if q["content"] != "which branch?" || q["turn_id"] != msg["turn_id"] || q["state"] != "question" {
		t.Errorf("question %v; want which branch? in turn %v", q, msg["turn_id"])
	}
	// The question also shows on the ticket.
	polled := e.Ok(lead, "fleet_poll", map[string]any{"ticket": q["ticket"]})
	adaptertest.WantOutcome(t, polled, "question", "turn_id", "ticket", "from", "content", "state")

	answer := e.Async(ctx, lead, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "release-2"}, nil)
	got := e.OkOf(e.Recv(ask))
	adaptertest.WantKeys(t, "fleet_ask", got, "answer", "timed_out")
	if got["answer"] != "release-2" || got["timed_out"] != false {
		t.Errorf("fleet_ask %v; want release-2, not timed out", got)
	}
	e.Ok(scout, "fleet_reply", map[string]any{"content": "released"})
	out := adaptertest.WantOutcome(t, e.OkOf(e.Recv(answer)), "reply", "turn_id", "from", "content")
	if out["content"] != "released" || out["turn_id"] != msg["turn_id"] {
		t.Errorf("outcome %v; want released in the same turn", out)
	}
	// The question was answered: answering again is refused.
	e.Fail(lead, "fleet_send", map[string]any{"turn_id": q["turn_id"], "content": "x"}, fleetstate.CodeUnknownTurn)
}

// TestAskTimesOut: with no answer the member gets its default.
func TestAskTimesOut(t *testing.T) {
	e := newEnv(t, envOpts{rv: &fleetstate.RendezvousOptions{AskTimeout: 30 * time.Millisecond}})
	tk := adaptertest.Str(e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "x", "wait": false}), "ticket")
	e.Ok(scout, "fleet_next", adaptertest.WaitArgs(0))
	got := e.Ok(scout, "fleet_ask", map[string]any{"question": "which?", "default": "main"})
	if got["answer"] != "main" || got["timed_out"] != true {
		t.Errorf("fleet_ask %v; want the default, timed out", got)
	}
	got = e.Ok(scout, "fleet_ask", map[string]any{"question": "which?"})
	if got["answer"] != "" || got["timed_out"] != true {
		t.Errorf("fleet_ask without default %v; want empty answer, timed out", got)
	}
	// The withdrawn question leaves the ticket working.
	p := e.Ok(lead, "fleet_poll", map[string]any{"ticket": tk})
	if p["outcome"] != "pending" || p["state"] != "working" {
		t.Errorf("poll %v; want pending, working", p)
	}
}

// TestDetached: wait:false gives a ticket at once; fleet_poll collects the
// outcome and fleet_ack drops it.
func TestDetached(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	sent := e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "long survey", "wait": false})
	adaptertest.WantOutcome(t, sent, "pending", "turn_id", "ticket", "from", "state")
	tk := adaptertest.Str(sent, "ticket")
	if sent["state"] != "queued" || !strings.HasPrefix(tk, "ticket-") {
		t.Errorf("detached send %v; want pending, queued, with a ticket", sent)
	}
	sent2 := e.Ok(lead, "fleet_send", map[string]any{"to": "miner", "content": "second", "wait": false})
	tk2 := adaptertest.Str(sent2, "ticket")

	p := e.Ok(lead, "fleet_poll", map[string]any{"ticket": tk})
	adaptertest.WantOutcome(t, p, "pending", "turn_id", "ticket", "from", "state")
	if p["state"] != "queued" || p["ticket"] != tk {
		t.Errorf("poll %v; want queued", p)
	}
	// A poll with wait_s and nothing actionable waits, then says pending.
	all := e.Ok(lead, "fleet_poll", map[string]any{"wait_s": 0.02})
	if ts := all["tickets"].([]any); len(ts) != 2 {
		t.Errorf("poll all %v; want two pending tickets", all)
	}

	msg := e.Ok(scout, "fleet_next", adaptertest.WaitArgs(0))
	if msg["content"] != "long survey" || msg["turn_id"] != sent["turn_id"] {
		t.Errorf("fleet_next %v; want the detached message", msg)
	}
	if p := e.Ok(lead, "fleet_poll", map[string]any{"ticket": tk}); p["state"] != "working" {
		t.Errorf("poll after pickup %v; want working", p)
	}

	// A poll that waits wakes on the reply.
	poll := e.Async(ctx, lead, "fleet_poll", map[string]any{"ticket": tk, "wait_s": 10}, nil)
	e.Ok(scout, "fleet_reply", map[string]any{"content": "42 findings"})
	done := adaptertest.WantOutcome(t, e.OkOf(e.Recv(poll)), "reply", "turn_id", "ticket", "from", "content", "state")
	if done["content"] != "42 findings" || done["state"] != "done" || done["ticket"] != tk {
		t.Errorf("poll %v; want the reply, done", done)
	}

	all = e.Ok(lead, "fleet_poll", map[string]any{"wait_s": 5})
	adaptertest.WantKeys(t, "fleet_poll all", all, "tickets")
	ts := all["tickets"].([]any)
	if len(ts) != 2 {
		t.Fatalf("poll all %v; want two tickets", all)
	}
	first, second := ts[0].(map[string]any), ts[1].(map[string]any)
	if first["ticket"] != tk || first["outcome"] != "reply" || second["ticket"] != tk2 || second["outcome"] != "pending" {
		t.Errorf("poll all %v; want the reply then the pending ticket, oldest first", all)
	}
	for _, o := range ts {
		for k := range o.(map[string]any) {
			if !slices.Contains(adaptertest.OutcomeKeys, k) {
				t.Errorf("ticket field %q is not an outcome field", k)
			}
		}
	}
	// The outcome stays until acked.
	if again := e.Ok(lead, "fleet_poll", map[string]any{"ticket": tk}); again["content"] != "42 findings" {
		t.Errorf("second poll %v; want the held reply", again)
	}
	ack := e.Ok(lead, "fleet_ack", map[string]any{"ticket": tk})
	adaptertest.WantKeys(t, "fleet_ack", ack, "ok")
	if ack["ok"] != true {
		t.Errorf("fleet_ack %v; want ok true", ack)
	}
	e.Fail(lead, "fleet_poll", map[string]any{"ticket": tk}, fleetstate.CodeUnknownTicket)
	e.Fail(lead, "fleet_ack", map[string]any{"ticket": tk}, fleetstate.CodeUnknownTicket)
	if all := e.Ok(lead, "fleet_poll", nil); len(all["tickets"].([]any)) != 1 {
		t.Errorf("poll all after ack %v; want miner's ticket only", all)
	}
}

// TestNextNone: fleet_next with nothing queued says {outcome: none}.
func TestNextNone(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, args := range []any{adaptertest.WaitArgs(0), adaptertest.WaitArgs(0.01)} {
		got := e.Ok(scout, "fleet_next", args)
		adaptertest.WantKeys(t, "fleet_next", got, "outcome")
		if got["outcome"] != "none" {
			t.Errorf("fleet_next %v; want outcome none", got)
		}
	}
	// With a short MaxWait the default wait is capped too.
	e2 := newEnv(t, envOpts{rv: &fleetstate.RendezvousOptions{MaxWait: 10 * time.Millisecond}})
	if got := e2.Ok(scout, "fleet_next", nil); got["outcome"] != "none" {
		t.Errorf("fleet_next with default wait %v; want outcome none", got)
	}
}

// TestNextEndsOpenTurn: a member that asks for new work has finished the
// old: its open turn ends as turn_done.
func TestNextEndsOpenTurn(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	send := e.Async(ctx, lead, "fleet_send", map[string]any{"to": "scout", "content": "first"}, nil)
	first := e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))
	tk := adaptertest.Str(e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "second", "wait": false}), "ticket")

	second := e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))
	if second["content"] != "second" {
		t.Errorf("second fleet_next %v; want the second message", second)
	}
	out := adaptertest.WantOutcome(t, e.OkOf(e.Recv(send)), "turn_done", "turn_id", "from")
	if out["turn_id"] != first["turn_id"] {
		t.Errorf("turn_done %v; want turn %v", out, first["turn_id"])
	}
	// And again for the detached one, seen through its ticket.
	none := e.Ok(scout, "fleet_next", adaptertest.WaitArgs(0))
	if none["outcome"] != "none" {
		t.Errorf("third fleet_next %v; want none", none)
	}
	p := e.Ok(lead, "fleet_poll", map[string]any{"ticket": tk})
	adaptertest.WantOutcome(t, p, "turn_done", "turn_id", "ticket", "from", "state")
	e.Ok(lead, "fleet_ack", map[string]any{"ticket": tk})
}

// TestSendBounds: a blocking send returns pending with a ticket at the
// send bound, and fails with member_not_ready when the member never mounts.
func TestSendBounds(t *testing.T) {
	t.Run("pending at the send bound", func(t *testing.T) {
		e := newEnv(t, envOpts{rv: &fleetstate.RendezvousOptions{SendTimeout: 30 * time.Millisecond}})
		e.Ok(scout, "fleet_next", adaptertest.WaitArgs(0)) // mounted: ready
		out := e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "slow"})
		adaptertest.WantOutcome(t, out, "pending", "turn_id", "ticket", "from", "state")
		e.Ok(scout, "fleet_next", adaptertest.WaitArgs(0))
		e.Ok(scout, "fleet_reply", map[string]any{"content": "late"})
		if p := e.Ok(lead, "fleet_poll", map[string]any{"ticket": out["ticket"]}); p["content"] != "late" {
			t.Errorf("poll %v; want the late reply", p)
		}
	})
	t.Run("member not ready", func(t *testing.T) {
		e := newEnv(t, envOpts{rv: &fleetstate.RendezvousOptions{ReadyTimeout: 20 * time.Millisecond}})
		out := e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "x"})
		adaptertest.WantOutcome(t, out, "failed", "turn_id", "from", "content", "reason")
		if out["reason"] != "member_not_ready" {
			t.Errorf("outcome %v; want reason member_not_ready", out)
		}
	})
	t.Run("busy member", func(t *testing.T) {
		e := newEnv(t, envOpts{})
		send := e.Async(context.Background(), lead, "fleet_send", map[string]any{"to": "scout", "content": "first"}, nil)
		e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))
		// scout has a turn open: a second blocking send does not wait.
		out := e.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "second"})
		adaptertest.WantOutcome(t, out, "pending", "turn_id", "ticket", "from", "state")
		e.Ok(scout, "fleet_reply", map[string]any{"content": "r"})
		e.OkOf(e.Recv(send))
	})
	t.Run("clean_sessions releases a blocked send", func(t *testing.T) {
		e := newEnv(t, envOpts{})
		send := e.Async(context.Background(), lead, "fleet_send", map[string]any{"to": "scout", "content": "x"}, nil)
		e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))
		e.Ok(lead, "clean_sessions", nil)
		out := adaptertest.WantOutcome(t, e.OkOf(e.Recv(send)), "failed", "turn_id", "from", "reason")
		if out["reason"] != "session_cleaned" {
			t.Errorf("outcome %v; want session_cleaned", out)
		}
		e.Fail(scout, "fleet_reply", map[string]any{"content": "x"}, fleetstate.CodeNoOpenTurn)
	})
}

// TestSendCancelled: a blocking fleet_send whose caller gives up returns
// at once with ERR_CANCELLED (a caller that gave up reads no result), and
// the turn goes on under its ticket, which fleet_poll shows.
func TestSendCancelled(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.Ok(scout, "fleet_next", adaptertest.WaitArgs(0)) // ready

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := e.Do(ctx, lead, "fleet_send", map[string]any{"to": "scout", "content": "x"}, nil)
	// The send bound is 58 s: returning at all long before it means the
	// cancellation stopped the wait.
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("cancelled fleet_send returned after %v", d)
	}
	e.ErrOf(r, fleetstate.CodeCancelled)
	page := e.Ok(lead, "fleet_poll", nil)
	tickets, _ := page["tickets"].([]any)
	if len(tickets) != 1 {
		t.Fatalf("fleet_poll %v; want the cancelled send's ticket", page)
	}
	out := tickets[0].(map[string]any)

	msg := e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))
	if msg["turn_id"] != out["turn_id"] {
		t.Errorf("fleet_next %v; want the cancelled send's turn %v", msg, out["turn_id"])
	}
	e.Ok(scout, "fleet_reply", map[string]any{"content": "kept"})
	if p := e.Ok(lead, "fleet_poll", map[string]any{"ticket": out["ticket"]}); p["content"] != "kept" {
		t.Errorf("poll %v; want the reply held on the ticket", p)
	}

	// A member's blocked fleet_next also stops when its caller gives up.
	ctx2, cancel2 := context.WithCancel(context.Background())
	next := e.Async(ctx2, scout, "fleet_next", adaptertest.WaitArgs(30), nil)
	cancel2()
	r = e.Recv(next)
	if r.Err == nil && r.Res != nil && !r.Res.IsError {
		t.Errorf("cancelled fleet_next succeeded: %v", r.Res.StructuredContent)
	}
}

// TestProgress: a blocked fleet_send sends notifications/progress with the
// client's token, and none without one.
func TestProgress(t *testing.T) {
	e := newEnv(t, envOpts{adapter: &mcpadapter.Options{ProgressInterval: 20 * time.Millisecond}})
	ctx := context.Background()
	progress := make(chan map[string]any, 100)
	e.notifyMu.Lock()
	e.notify = func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		select {
		case progress <- n.Params.AdditionalFields:
		default:
		}
	}
	e.notifyMu.Unlock()
	t.Cleanup(func() {
		e.notifyMu.Lock()
		e.notify = nil
		e.notifyMu.Unlock()
	})

	send := e.Async(ctx, lead, "fleet_send", map[string]any{"to": "scout", "content": "x"}, &mcp.Meta{ProgressToken: "tok-1"})
	var got []map[string]any
	for len(got) < 2 {
		select {
		case p := <-progress:
			got = append(got, p)
		case <-time.After(adaptertest.WaitLimit):
			t.Fatalf("no progress notifications within %v", adaptertest.WaitLimit)
		}
	}
	e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))
	e.Ok(scout, "fleet_reply", map[string]any{"content": "r"})
	adaptertest.WantOutcome(t, e.OkOf(e.Recv(send)), "reply", "turn_id", "from", "content")
	for i, p := range got {
		if p["progressToken"] != "tok-1" {
			t.Errorf("notification %d: token %v; want tok-1", i, p["progressToken"])
		}
		if n := fmt.Sprint(p["progress"]); n != fmt.Sprint(i+1) {
			t.Errorf("notification %d: progress %v; want %d (increasing)", i, p["progress"], i+1)
		}
	}

	// Without a token: no notifications. The call blocks for several
	// intervals (its send bound), and nothing may arrive.
	for len(progress) > 0 {
		<-progress
	}
	e2 := newEnv(t, envOpts{
		rv:      &fleetstate.RendezvousOptions{SendTimeout: 150 * time.Millisecond},
		adapter: &mcpadapter.Options{ProgressInterval: 20 * time.Millisecond},
	})
	quiet := make(chan struct{}, 100)
	e2.notifyMu.Lock()
	e2.notify = func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			quiet <- struct{}{}
		}
	}
	e2.notifyMu.Unlock()
	e2.Ok(scout, "fleet_next", adaptertest.WaitArgs(0))
	adaptertest.WantOutcome(t, e2.Ok(lead, "fleet_send", map[string]any{"to": "scout", "content": "x"}), "pending", "turn_id", "ticket", "from", "state")
	if n := len(quiet); n != 0 {
		t.Errorf("%d progress notifications without a progress token", n)
	}
}

// --- tools/list -------------------------------------------------------

func TestToolsList(t *testing.T) {
	e := newEnv(t, envOpts{})
	want := []string{"new_session", "get_session", "clean_sessions", "put", "get", "list",
		"fleet_send", "fleet_next", "fleet_ask", "fleet_reply", "fleet_poll", "fleet_ack", "fleet_cancel", "fleet_members", "fleet_approve"}
	if len(e.Tools) != len(want) {
		t.Errorf("%d tools; want %d", len(e.Tools), len(want))
	}
	for _, name := range want {
		t.Run(name, func(t *testing.T) {
			tl, ok := e.Tools[name]
			if !ok {
				t.Fatalf("tool %s not listed", name)
			}
			if d, _ := tl["description"].(string); len(d) < 40 {
				t.Errorf("description %q; want one a model can act on", d)
			}
			in, _ := tl["inputSchema"].(map[string]any)
			if in["type"] != "object" {
				t.Errorf("input schema type %v; want object", in["type"])
			}
			if ap, ok := in["additionalProperties"]; !ok || ap != false {
				t.Errorf("input schema additionalProperties %v; want false", ap)
			}
			props, _ := in["properties"].(map[string]any)
			if props == nil {
				t.Errorf("input schema has no properties object")
			}
			for p, s := range props {
				sm, _ := s.(map[string]any)
				if sm["type"] == nil || sm["description"] == "" {
					t.Errorf("argument %s: schema %v; want a type and a description", p, sm)
				}
			}
			if req, ok := in["required"].([]any); ok {
				for _, r := range req {
					if _, ok := props[r.(string)]; !ok {
						t.Errorf("required %v is not a property", r)
					}
				}
			}
			adaptertest.CompileSchema(t, name+"-input", in)

			out, _ := tl["outputSchema"].(map[string]any)
			if out["type"] != "object" {
				t.Errorf("output schema type %v; want object", out["type"])
			}
			if any, ok := out["anyOf"].([]any); !ok || len(any) < 2 {
				t.Errorf("output schema anyOf %v; want the success and the error object", out["anyOf"])
			}
			s := e.Outputs[name]
			if err := adaptertest.Validate(s, map[string]any{"error": "ERR_INTERNAL", "message": "m"}); err != nil {
				t.Errorf("output schema refuses an error object: %v", err)
			}
			if err := adaptertest.Validate(s, successExample[name]); err != nil {
				t.Errorf("output schema refuses the success object %v: %v", successExample[name], err)
			}
			if err := adaptertest.Validate(s, "not an object"); err == nil {
				t.Errorf("output schema admits a string")
			}

			ann, _ := tl["annotations"].(map[string]any)
			for _, hint := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
				if _, ok := ann[hint].(bool); !ok {
					t.Errorf("annotation %s = %v; want an explicit boolean", hint, ann[hint])
				}
			}
			if ann["openWorldHint"] != false {
				t.Errorf("openWorldHint %v; want false (the tools touch only the state directory)", ann["openWorldHint"])
			}
			if ann["readOnlyHint"] == true && ann["destructiveHint"] == true {
				t.Errorf("a read-only tool marked destructive")
			}
		})
	}
	// Hints that must hold for the named tools.
	hint := func(tool, h string) any { return e.Tools[tool]["annotations"].(map[string]any)[h] }
	for _, tool := range []string{"get_session", "get", "list", "fleet_members"} {
		if hint(tool, "readOnlyHint") != true {
			t.Errorf("%s: readOnlyHint %v; want true", tool, hint(tool, "readOnlyHint"))
		}
	}
	for _, tool := range []string{"clean_sessions", "put"} {
		if hint(tool, "destructiveHint") != true {
			t.Errorf("%s: destructiveHint %v; want true", tool, hint(tool, "destructiveHint"))
		}
	}

	// The mcp-go view of the same list: annotations survive decoding.
	res, err := e.Client.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		a := tl.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: annotations %+v; want all four hints set", tl.Name, a)
		}
		// What a proxy or a forwarding daemon sends again after a lost
		// daemon: every read-only tool, and no tool with an effect but
		// those whose second call finds the first's work.
		readOnly := a.ReadOnlyHint != nil && *a.ReadOnlyHint
		again := mcpadapter.SafeToResend(tl.Name, json.RawMessage(`{}`))
		switch tl.Name {
		case "fleet_ask":
			readOnly = true
		case "fleet_next":
			if !mcpadapter.SafeToResend(tl.Name, json.RawMessage(`{"after_turn":""}`)) {
				t.Errorf("fleet_next with after_turn: not safe to send again; want safe")
			}
		}
		if again != readOnly {
			t.Errorf("SafeToResend(%s, {}) = %v; want %v", tl.Name, again, readOnly)
		}
	}
}

// successExample is a success result of each tool, as the README names
// its fields.
var successExample = map[string]any{
	"new_session":    map[string]any{"id": "00000000-0000-4000-8000-000000000000"},
	"get_session":    map[string]any{"id": "00000000-0000-4000-8000-000000000000", "name": "n"},
	"clean_sessions": map[string]any{"success": true},
	"put":            map[string]any{"id": "fsm::file::s::a::f"},
	"get":            map[string]any{"content": "c"},
	"list": map[string]any{"files": []any{map[string]any{
		"id": "fsm::file::s::a::f", "agent_name": "a", "file_name": "f", "size": 3, "modified": "2026-01-01T00:00:00Z"}}},
	"fleet_send": map[string]any{"outcome": "failed", "turn_id": "t", "ticket": "k", "from": "m", "content": "c",
		"partial": true, "reason": "backend_exhausted", "state": "done"},
	"fleet_next":    map[string]any{"turn_id": "t", "from": "lead", "content": "c"},
	"fleet_ask":     map[string]any{"answer": "a", "timed_out": false},
	"fleet_reply":   map[string]any{"ok": true},
	"fleet_poll":    map[string]any{"tickets": []any{map[string]any{"outcome": "pending", "ticket": "k", "state": "queued"}}},
	"fleet_ack":     map[string]any{"ok": true},
	"fleet_approve": map[string]any{"ok": true},
	"fleet_cancel":  map[string]any{"outcome": "failed", "reason": "cancelled", "ticket": "ticket-1", "turn_id": "turn-1", "state": "done"},
	"fleet_members": map[string]any{"members": []any{map[string]any{"name": "m", "ready": true, "status": "PULL", "queued": 0,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 2}}}},
}

// TestMembersShape: fleet_members lists every member with its readiness,
// its queue and its usage.
func TestMembersShape(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.Ok(scout, "fleet_next", adaptertest.WaitArgs(0)) // scout mounts: ready
	e.Ok(lead, "fleet_send", map[string]any{"to": "miner", "content": "x", "wait": false})
	m := e.Ok(lead, "fleet_members", nil)
	adaptertest.WantKeys(t, "fleet_members", m, "members")
	ms, _ := m["members"].([]any)
	if len(ms) != 2 {
		t.Fatalf("members %v; want miner and scout", m)
	}
	none := map[string]any{"input_tokens": 0.0, "output_tokens": 0.0}
	want := []map[string]any{
		{"name": "miner", "ready": false, "status": "PULL", "queued": 1.0, "usage": none},
		{"name": "scout", "ready": true, "status": "PULL", "queued": 0.0, "usage": none},
	}
	for i, w := range want {
		got, _ := ms[i].(map[string]any)
		if !reflect.DeepEqual(got, w) {
			t.Errorf("member %d: %v; want %v", i, got, w)
		}
	}
}

// TestMarkReady: with MarkReady, a member's call, once its role is
// checked, makes it ready; with AddOnReady in the rendezvous, a member it
// did not know is added. Without MarkReady, calls change nothing.
func TestMarkReady(t *testing.T) {
	late := mcpadapter.Identity{Agent: "late", Role: mcpadapter.RoleMember}
	ready := func(e *env) map[string]bool {
		out := map[string]bool{}
		for _, m := range e.rv.Members() {
			out[m.Name] = m.Ready
		}
		return out
	}

	e := newEnv(t, envOpts{})
	e.Fail(scout, "get_session", nil, fleetstate.CodeNoActiveSession)
	if got, want := ready(e), map[string]bool{"scout": false, "miner": false}; !reflect.DeepEqual(got, want) {
		t.Errorf("without MarkReady: members %v; want %v", got, want)
	}

	e = newEnv(t, envOpts{rv: &fleetstate.RendezvousOptions{AddOnReady: true}, adapter: &mcpadapter.Options{MarkReady: true}})
	e.Fail(scout, "get_session", nil, fleetstate.CodeNoActiveSession) // a failed call is still a call
	e.Fail(miner, "fleet_members", nil, fleetstate.CodeNotPermitted)  // refused before
	e.Fail(late, "get_session", nil, fleetstate.CodeNoActiveSession)
	e.Ok(lead, "fleet_members", nil)
	if got, want := ready(e), map[string]bool{"scout": true, "miner": false, "late": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("with MarkReady: members %v; want %v", got, want)
	}
}

// TestReplyReportsUsage: a member whose host reports no usage sends its
// running total with fleet_reply; it counts once, to the member and to
// the turn the reply ends, whose outcome tells it. Counts without a
// source, or not whole, are refused and change nothing.
func TestReplyReportsUsage(t *testing.T) {
	e := newEnv(t, envOpts{})
	ch := make(chan adaptertest.Reply, 1)
	go func() {
		ch <- e.Do(context.Background(), lead, "fleet_send", map[string]any{"to": "scout", "content": "work"}, nil)
	}()
	e.Ok(scout, "fleet_next", adaptertest.WaitArgs(10))
	e.Fail(scout, "fleet_reply", map[string]any{"content": "x", "input_tokens": 5}, fleetstate.CodeInvalidArgument)
	e.Fail(scout, "fleet_reply", map[string]any{"content": "x", "usage_source": "p", "input_tokens": 1.5}, fleetstate.CodeInvalidArgument)
	e.Fail(scout, "fleet_reply", map[string]any{"content": "x", "usage_source": "p", "output_tokens": -1}, fleetstate.CodeInvalidArgument)
	e.Ok(scout, "fleet_reply", map[string]any{"content": "done", "usage_source": "proc-1",
		"input_tokens": 120, "output_tokens": 30, "cache_read_tokens": 7, "cache_write_tokens": 0})
	o := e.OkOf(e.Recv(ch))
	if got, want := o["usage"], map[string]any{"input_tokens": 120.0, "output_tokens": 30.0, "cache_read_tokens": 7.0}; !reflect.DeepEqual(got, want) {
		t.Errorf("the outcome's usage = %v; want %v", got, want)
	}
	ms, _ := e.Ok(lead, "fleet_members", nil)["members"].([]any)
	for _, m := range ms {
		if m, _ := m.(map[string]any); m["name"] == "scout" {
			if got, want := m["usage"], map[string]any{"input_tokens": 120.0, "output_tokens": 30.0, "cache_read_tokens": 7.0}; !reflect.DeepEqual(got, want) {
				t.Errorf("scout's usage = %v; want %v", got, want)
			}
		}
	}
}
