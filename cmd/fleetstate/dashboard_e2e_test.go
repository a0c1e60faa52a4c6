package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/fleetstate/fleetstate/daemon/dashboard"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/textsafe"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// updateScreenshot names the environment variable that makes the browser
// test write its screenshot to docs/dashboard.png; otherwise the test
// leaves the tree as it was.
const updateScreenshot = "FLEETSTATE_UPDATE_SCREENSHOT"

// browserTab starts headless Chromium (Debian's package) with a fresh
// profile and returns a context for one tab. The test's cleanup closes
// the browser and waits for its process.
func browserTab(t *testing.T) context.Context {
	t.Helper()
	path := fleettest.NeedCommand(t, fleettest.RequireChromium, "chromium", "the dashboard test drives a real browser (apt-get install chromium)")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // CI runs as root, where Chromium's sandbox cannot start
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		// Its singleton socket's folder, org.chromium.Chromium.*, goes
		// where TMPDIR says: the test's own, removed with it.
		chromedp.Env("TMPDIR=" + t.TempDir()),
		chromedp.WindowSize(1200, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the browser's process
	})
	// The first action starts the browser; it gets no timeout of its own
	// (that would stop the browser with it).
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// textOf returns the rendered text of the element sel, or "" if none.
func textOf(ctx context.Context, sel string) string {
	q, _ := json.Marshal(sel)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%s) || {innerText: ""}).innerText`, q)))
	return s
}

// waitText waits until the rendered text of sel contains every one of
// want.
func waitText(t *testing.T, ctx context.Context, sel string, want ...string) {
	t.Helper()
	q, _ := json.Marshal(sel)
	w, _ := json.Marshal(want)
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && %s.every((w) => e.innerText.includes(w)); })()`, q, w)
	// Each look is an evaluation of its own: a page that navigates
	// meanwhile (a reload, a log out) drops the context a long poll runs in.
	var err error
	if !fleettest.Until(15*time.Second, 50*time.Millisecond, func() bool {
		var shown bool
		look, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		shown, err = chromedp.Run(look, chromedp.Evaluate[bool](expr))
		return err == nil && shown
	}) {
		t.Fatalf("%s never showed %q (last error: %v); it shows:\n%s", sel, want, err, textOf(ctx, sel))
	}
}

// TestDashboardInChromium logs a real browser in to a real daemon's
// dashboard through the URL `fleetstate web` prints, and watches the page
// follow a delegation with a question, its answer and the reply.
func TestDashboardInChromium(t *testing.T) {
	ctx := browserTab(t)
	f := newFleet(t)
	call := context.Background()
	base := strings.TrimSuffix(f.d.url, "/mcp")

	// Without a login, the browser gets the page that says how to log in.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/dashboard/")); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "body", "needs a login", "fleetstate web")
	if s := textOf(ctx, "body"); strings.Contains(s, "m1") {
		t.Fatalf("the page without a login shows the fleet:\n%s", s)
	}

	out, err := exec.Command(binary, "web", "--dir", f.dir).Output()
	if err != nil {
		t.Fatalf("fleetstate web: %v", err)
	}
	login := strings.TrimSpace(string(out))
	if !strings.HasPrefix(login, base+"/dashboard/login?code=") {
		t.Fatalf("fleetstate web printed %q", login)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(login)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#conn", "live")
	waitText(t, ctx, "#members", "m1", "m2", "ready")

	// The login URL works once.
	if err := chromedp.Do(ctx, chromedp.Navigate(login)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "body", "wrong, already used or expired")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/dashboard/")); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#conn", "live")

	// A detached send: the ticket appears, queued, then working once m1
	// takes it, with the open turn on m1's row.
	o := ok(call, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "count the files in cmd/", "wait": false})
	ticket, _ := o["ticket"].(string)
	waitText(t, ctx, "#tickets", ticket, "count the files in cmd/")
	msg := ok(call, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	turn, _ := msg["turn_id"].(string)
	waitText(t, ctx, "#tickets", "working")
	waitText(t, ctx, "#members", turn)

	// A question and its answer show in the turn's transcript.
	asked := async(call, t, f.m1, "fleet_ask", map[string]any{"question": "including tests?", "default": "no"})
	waitText(t, ctx, "#tickets", "question")
	waitText(t, ctx, "#turns", "count the files in cmd/")
	answered := async(call, t, f.lead, "fleet_send", map[string]any{"turn_id": turn, "content": "yes, tests too"})
	if a := recvWithin(t, asked, 10*time.Second); a["answer"] != "yes, tests too" {
		t.Fatalf("fleet_ask = %v", a)
	}
	ok(call, t, f.m1, "fleet_reply", map[string]any{"content": "31 files, 12 of them tests",
		"usage_source": "m1's process", "input_tokens": 12000, "output_tokens": 345})
	if r := recvWithin(t, answered, 10*time.Second); r["outcome"] != "reply" {
		t.Fatalf("answer's outcome = %v", r)
	}
	waitText(t, ctx, "#tickets", "done", "reply")
	waitText(t, ctx, "#events", "asked", "answered", "outcome")
	// What m1 used shows on its row, and not as a line of the events.
	waitText(t, ctx, `#members tr[data-member="m1"]`, "12.0k in 345 out")
	if s := textOf(ctx, "#events"); strings.Contains(s, "usage") {
		t.Errorf("the events list a usage event:\n%s", s)
	}
	// The operator gives m1 a budget it has spent already: its row and
	// the events say so.
	op := dialOperator(t, f.dir, f.d.url)
	if err := op.Call(call, "fleet_budget", map[string]any{"member": "m1", "tokens": 10000}, nil); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, `#members tr[data-member="m1"]`, "(budget spent)")
	waitText(t, ctx, "#events", "budget_exhausted", "budget of 10000 tokens: 12345 spent, no new turns")
	// The operator raises it from the page, then removes it.
	if err := chromedp.Do(ctx, chromedp.SetValue("", "m1", byRole("#budget", "combobox", "Of"))); err != nil {
		t.Fatalf("the budget's member list: %v", err)
	}
	typeRole(t, ctx, "#budget", "textbox", "Limit", "20000")
	clickRole(t, ctx, "#budget", "button", "Set")
	waitText(t, ctx, "#act-status", "budget of m1 set")
	waitText(t, ctx, `#members tr[data-member="m1"]`, "(61% of budget)")
	var budgets struct {
		Budgets []struct {
			Member string `json:"member"`
			Tokens int64  `json:"tokens"`
			Held   bool   `json:"held"`
		} `json:"budgets"`
	}
	if err := op.Call(call, "fleet_budget", map[string]any{}, &budgets); err != nil {
		t.Fatal(err)
	}
	if bs := budgets.Budgets; len(bs) != 1 || bs[0].Member != "m1" || bs[0].Tokens != 20000 || bs[0].Held {
		t.Fatalf("budgets after the page's raise = %+v; want m1's at 20000, not held", bs)
	}
	clickRole(t, ctx, "#budget", "button", "Remove")
	waitText(t, ctx, "#events", "budget removed")
	if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`details[data-turn=%q] summary`, turn))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#turns", "including tests?", "yes, tests too", "31 files, 12 of them tests")

	// A reload keeps the transcript: the daemon holds it.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#conn", "live")
	waitText(t, ctx, "#turns", "count the files in cmd/")
	// The events before the page loaded are listed at once.
	waitText(t, ctx, "#events", "asked", "answered", "outcome")
	waitText(t, ctx, `#members tr[data-member="m1"]`, "12.0k in 345 out")
	if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`details[data-turn=%q] summary`, turn))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#turns", "including tests?", "yes, tests too", "31 files, 12 of them tests")

	// Another delegation left open, for the picture: m2 at work.
	ok(call, t, f.lead, "fleet_send", map[string]any{"to": "m2", "content": "update the README's install line", "wait": false})
	ok(call, t, f.m2, "fleet_next", map[string]any{"wait_s": 10})
	waitText(t, ctx, "#members", "m2")
	waitText(t, ctx, "#tickets", "update the README's install line", "working")
	// And m2's agent asks to run a command, for the picture: a pending
	// permission request with its Allow and Deny.
	runHook(t, f.d.url, f.tokens["m2"], "npm install --save-dev markdownlint", time.Minute)
	waitText(t, ctx, "#requests", "m2", "npm install")

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(shot)); err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if os.Getenv(updateScreenshot) != "" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "dashboard.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDashboardShowsRequestsEscapedInChromium: what a permission request
// holds that a page would hide or reorder (newlines, a right-to-left
// override) shows escaped; the row clips the input with a mark of how
// much is left, and shows it whole on demand; the events say what was
// asked. The page's escaping is the Go one's, on the same inputs, for
// one line and for prose.
func TestDashboardShowsRequestsEscapedInChromium(t *testing.T) {
	ctx := browserTab(t)
	f := newFleet(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(webLogin(t, f.dir))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#conn", "live")

	for _, text := range []string{
		"", "git status\n\n; rm -rf ~", "echo \u202egnp.exe \u2066x\u2069\u200e\u200f",
		"zero\u200bwidth\ufeff \u3164 \ufe0f \U000e0041", "tab\tcr\r\x1b[2J\x7f\u0085",
		`back\slash`, "café 東京 ✓ \U0001f600 \u00a0\u2028\u2029",
	} {
		in, err := json.Marshal(text)
		if err != nil {
			t.Fatal(err)
		}
		js := fmt.Sprintf(`JSON.stringify([fleetstateText.escape(%s), fleetstateText.clip(%s, 12), fleetstateText.escapeText(%s)])`, in, in, in)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal([]string{textsafe.Escape(text), textsafe.Clip(text, 12), textsafe.EscapeText(text)})
		if got != string(want) {
			t.Errorf("the page escapes %q as %s; the Go escaping as %s", text, got, want)
		}
	}

	hidden := "git status" + strings.Repeat(`\n`, 40) + "; rm -rf ~/work" + strings.Repeat(" ", 300)
	runHook(t, f.d.url, f.tokens["m1"], hidden, time.Minute)
	waitText(t, ctx, "#requests", "git status") // first, in the first row
	runHook(t, f.d.url, f.tokens["m2"], `echo \u202egnp.exe`, time.Minute)
	waitText(t, ctx, "#requests", `git status\n\n\n`, "more characters)", `echo \u202egnp.exe`)
	if s := textOf(ctx, "#requests"); strings.ContainsRune(s, '\u202e') {
		t.Errorf("the requests show a raw right-to-left override:\n%s", s)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#requests tr:first-child details.input-all summary`)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#requests tr:first-child details.input-all", "; rm -rf ~/work")
	waitText(t, ctx, "#events", `asks Bash "git status\n`, `asks Bash "echo \u202egnp.exe"`)
}

// TestWebCommand covers `fleetstate web`'s ways in and its errors.
func TestWebCommand(t *testing.T) {
	dir := t.TempDir()
	tokens := addTokens(t, dir, map[string]string{"lead": "lead", "m1": "member"})
	web := func(env []string, args ...string) (string, string, error) {
		cmd := exec.Command(binary, append([]string{"web"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return strings.TrimSpace(stdout.String()), stderr.String(), err
	}
	missing := filepath.Join(t.TempDir(), "nowhere")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no directory", nil, []string{"--dir", missing}, "no state directory " + missing},
		{"no daemon", nil, []string{"--dir", dir}, "no daemon serves " + dir},
		{"both", nil, []string{"--dir", dir, "--url", "http://127.0.0.1:1/mcp"}, "not both"},
		{"url without token", []string{"FLEET_TOKEN="}, []string{"--url", "http://127.0.0.1:1/mcp"}, "$FLEET_TOKEN"},
		{"url without daemon", []string{"FLEET_TOKEN=" + tokens["lead"]}, []string{"--url", "http://127.0.0.1:1/mcp"}, "no daemon at http://127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := web(tc.env, tc.args...)
			if err == nil || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("web %v: %v, stdout %q, stderr %q; want a failure naming %q", tc.args, err, out, errOut, tc.want)
			}
		})
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("web created the missing state directory %s", missing)
	}
	d := startDaemon(t, dir)
	base := strings.TrimSuffix(d.url, "/mcp")
	out, _, err := web([]string{"FLEET_TOKEN=" + tokens["lead"]}, "--url", d.url)
	if err != nil || !strings.HasPrefix(out, base+"/dashboard/login?code=") {
		t.Fatalf("web --url with the lead's token: %v, %q", err, out)
	}
	if out, errOut, err := web([]string{"FLEET_TOKEN=" + tokens["m1"]}, "--url", d.url); err == nil || !strings.Contains(errOut, "refused the token") {
		t.Fatalf("web --url with a member's token: %v, %q, %q; want refused", err, out, errOut)
	}
	if out, _, err := web(nil, "--dir", dir); err != nil || !strings.HasPrefix(out, base+"/dashboard/login?code=") {
		t.Fatalf("web --dir: %v, %q", err, out)
	}
}

// byRole finds, inside the first element that the CSS selector scope
// matches, the elements with the accessible role and name given, as a
// screen reader finds them: Chromium computes both.
func byRole(scope, role, name string) chromedp.QueryOption {
	return chromedp.ByFunc(func(ctx context.Context, t *chromedp.Target, n *chromedp.Node) ([]cdp.NodeID, error) {
		box, err := cdp.Call(ctx, t, dom.QuerySelector, dom.QuerySelectorParams{NodeID: n.NodeID, Selector: scope})
		if err != nil || box.NodeID == 0 {
			return nil, err
		}
		found, err := cdp.Call(ctx, t, accessibility.QueryAXTree, accessibility.QueryAXTreeParams{NodeID: box.NodeID, Role: role, AccessibleName: name})
		if err != nil {
			return nil, err
		}
		var ids []cdp.BackendNodeID
		for _, a := range found.Nodes {
			if !a.Ignored && a.BackendDOMNodeID != 0 {
				ids = append(ids, a.BackendDOMNodeID)
			}
		}
		if len(ids) == 0 {
			return nil, nil
		}
		pushed, err := cdp.Call(ctx, t, dom.PushNodesByBackendIDsToFrontend, dom.PushNodesByBackendIDsToFrontendParams{BackendNodeIDs: ids})
		return pushed.NodeIDs, err
	})
}

// withRole runs action on the control of role and name inside scope,
// waiting a bounded time for it to appear.
func withRole(t *testing.T, ctx context.Context, scope, role, name string, action func(opts ...chromedp.QueryOption) chromedp.Action[chromedp.Void]) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(wctx, action(byRole(scope, role, name), chromedp.NodeVisible)); err != nil {
		t.Fatalf("%s named %q in %s: %v; the page shows:\n%s", role, name, scope, err, textOf(ctx, "body"))
	}
}

func clickRole(t *testing.T, ctx context.Context, scope, role, name string) {
	t.Helper()
	withRole(t, ctx, scope, role, name, func(opts ...chromedp.QueryOption) chromedp.Action[chromedp.Void] {
		return chromedp.Click("", opts...)
	})
}

func typeRole(t *testing.T, ctx context.Context, scope, role, name, text string) {
	t.Helper()
	withRole(t, ctx, scope, role, name, func(opts ...chromedp.QueryOption) chromedp.Action[chromedp.Void] {
		return chromedp.SendKeys("", text, opts...)
	})
}

// webLogin returns a one-time login URL for the operator of dir's daemon,
// from `fleetstate web`.
func webLogin(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command(binary, "web", "--dir", dir).Output()
	if err != nil {
		t.Fatalf("fleetstate web: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// replay sends an action of the dashboard as a plain HTTP request with
// the headers given, and returns its status.
func replay(t *testing.T, base, path, body string, headers map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/dashboard/"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// fitsPhone checks that the page, at a phone's width of 390 px, scrolls
// nothing sideways and has every control on screen.
func fitsPhone(t *testing.T, ctx context.Context) {
	t.Helper()
	fits := `(() => {
		const w = document.documentElement.clientWidth;
		const out = [...document.querySelectorAll('button, input, select, textarea')]
			.filter((e) => e.offsetParent && e.getBoundingClientRect().right > w + 0.5);
		return window.innerWidth === 390 && document.documentElement.scrollWidth <= w && out.length === 0;
	})()`
	if fit, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fits)); err != nil || !fit {
		sizes, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`window.innerWidth + " wide, scrolls " + document.documentElement.scrollWidth`))
		t.Fatalf("at 390 px the page does not fit (%v): %s", err, sizes)
	}
}

// TestDashboardActsInChromium steers a fleet from a real browser: the
// operator answers a member's question, cancels a queued ticket, sends a
// task and dismisses its finished ticket, each through the page's named
// controls, and each is checked from the member's or the lead's side
// through MCP. The same actions replayed from another origin, or without
// the login, change nothing. At a phone's width the page still fits, and
// its controls still work. A lead's login gets controls on its own
// tickets only, and logs out.
func TestDashboardActsInChromium(t *testing.T) {
	ctx := browserTab(t)
	f := newFleet(t)
	call := context.Background()
	base := strings.TrimSuffix(f.d.url, "/mcp")
	if err := chromedp.Do(ctx, chromedp.Navigate(webLogin(t, f.dir))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#conn", "live")
	waitText(t, ctx, "#members", "m1", "m2")
	waitText(t, ctx, "#actor", "operator")

	// Answer: the member's fleet_ask returns what was typed in the box.
	o := ok(call, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "count the files in cmd/", "wait": false})
	ticket, _ := o["ticket"].(string)
	ok(call, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	asked := async(call, t, f.m1, "fleet_ask", map[string]any{"question": "including the tests?", "default": "no"})
	row := fmt.Sprintf("#tickets tr[data-ticket=%q]", ticket)
	waitText(t, ctx, row, "question", "including the tests?")
	// Events that come while an answer is typed leave its box, its text
	// and its focus alone.
	typeRole(t, ctx, row, "textbox", "Answer", "yes, ")
	o = ok(call, t, f.lead, "fleet_send", map[string]any{"to": "m2", "content": "an interruption", "wait": false})
	ok(call, t, f.lead, "fleet_cancel", map[string]any{"ticket": o["ticket"]})
	waitText(t, ctx, fmt.Sprintf("#tickets tr[data-ticket=%q]", o["ticket"]), "cancelled")
	focused := `(() => { const e = document.activeElement; return !!e && e.getAttribute('aria-label') === 'Answer' && e.value === 'yes, '; })()`
	if still, err := chromedp.Run(ctx, chromedp.Evaluate[bool](focused)); err != nil || !still {
		t.Fatalf("an event took the answer being typed away from its box (%v)", err)
	}
	typeRole(t, ctx, row, "textbox", "Answer", "tests too")
	clickRole(t, ctx, row, "button", "Answer")
	if a := recvWithin(t, asked, 10*time.Second); a["answer"] != "yes, tests too" {
		t.Fatalf("the member's fleet_ask = %v; want the answer typed in the page", a)
	}
	ok(call, t, f.m1, "fleet_reply", map[string]any{"content": "31 files, 12 of them tests"})
	if p := ok(call, t, f.lead, "fleet_poll", map[string]any{"ticket": ticket}); p["outcome"] != "reply" || p["content"] != "31 files, 12 of them tests" {
		t.Fatalf("the lead's poll after the answer = %v; want the member's reply", p)
	}
	// The ticket shows its outcome's text, not only its kind.
	waitText(t, ctx, row, "reply", "31 files, 12 of them tests")

	// Cancel: m2 has not asked for work, so the ticket waits queued; once
	// cancelled, the lead's poll says so and m2 never gets it.
	o = ok(call, t, f.lead, "fleet_send", map[string]any{"to": "m2", "content": "never to be done", "wait": false})
	queued, _ := o["ticket"].(string)
	qrow := fmt.Sprintf("#tickets tr[data-ticket=%q]", queued)
	waitText(t, ctx, qrow, "queued")
	clickRole(t, ctx, qrow, "button", "Cancel")
	waitText(t, ctx, qrow, "cancelled")
	if p := ok(call, t, f.lead, "fleet_poll", map[string]any{"ticket": queued}); p["outcome"] != "failed" || p["reason"] != "cancelled" {
		t.Fatalf("the lead's poll after the cancel = %v; want failed (cancelled)", p)
	}
	if n := ok(call, t, f.m2, "fleet_next", map[string]any{"wait_s": 0.2}); n["outcome"] != "none" {
		t.Fatalf("m2's fleet_next after the cancel = %v; want none", n)
	}

	// Send: a task from the form reaches the member, from the operator.
	if err := chromedp.Do(ctx, chromedp.SetValue("", "m2", byRole("#send", "combobox", "Member"))); err != nil {
		t.Fatalf("the Member list: %v", err)
	}
	typeRole(t, ctx, "#send", "textbox", "Brief", "update the README's install line")
	clickRole(t, ctx, "#send", "button", "Send")
	msg := ok(call, t, f.m2, "fleet_next", map[string]any{"wait_s": 10})
	if msg["content"] != "update the README's install line" || msg["from"] != mcpadapter.OperatorAgent {
		t.Fatalf("m2's fleet_next after the send = %v; want the brief, from %s", msg, mcpadapter.OperatorAgent)
	}
	waitText(t, ctx, "#act-status", "sent to m2")

	// Dismiss: once done, the operator's own ticket can be acked away, so
	// that the operator's sends do not pile up; nobody else's can.
	ok(call, t, f.m2, "fleet_reply", map[string]any{"content": "README updated"})
	waitText(t, ctx, "#tickets", "README updated")
	clickRole(t, ctx, "#tickets", "button", "Dismiss")
	waitText(t, ctx, "#act-status", "dismissed")
	gone := `!document.querySelector('#tickets').innerText.includes("update the README's install line")`
	gctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(gctx, chromedp.Poll[bool](gone, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("the dismissed ticket stays (%v):\n%s", err, textOf(ctx, "#tickets"))
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#tickets button.dismiss').length`)); err != nil || n != 0 {
		t.Fatalf("%d Dismiss buttons left (%v); want none: the other done tickets are the lead's", n, err)
	}

	// Allow and Deny: the members' agents ask through the real
	// PermissionRequest hook; the page shows each request's command,
	// Allow lets the first go on, Deny with a message refuses the second.
	allowed := runHook(t, f.d.url, f.tokens["m1"], "go test ./...", time.Minute)
	waitText(t, ctx, "#requests", "m1", "go test ./...")
	clickRole(t, ctx, "#requests", "button", "Allow")
	if got := allowed.output(t, 20*time.Second); got != allowOut {
		t.Fatalf("the hook after Allow printed %q; want %q", got, allowOut)
	}
	waitText(t, ctx, "#act-status", "allowed")
	denied := runHook(t, f.d.url, f.tokens["m2"], "rm -rf build", time.Minute)
	waitText(t, ctx, "#requests", "m2", "rm -rf build")
	typeRole(t, ctx, "#requests", "textbox", "Deny message", "the build folder is shared")
	clickRole(t, ctx, "#requests", "button", "Deny")
	if got, want := denied.output(t, 20*time.Second), strings.Replace(denyOut, "%s", "the build folder is shared", 1); got != want {
		t.Fatalf("the hook after Deny printed %q; want %q", got, want)
	}
	waitText(t, ctx, "#act-status", "denied")

	// Replays: the login's own cookie and CSRF token, taken out of the
	// browser, are refused from another origin, and the token without
	// the cookie is refused too. The ticket stays queued, and m1 gets it.
	cookies, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (*network.GetCookiesResult, error) {
		r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/dashboard/"}})
		return &r, err
	})
	if err != nil || len(cookies.Cookies) != 1 {
		t.Fatalf("the browser's cookies: %v, %v", cookies, err)
	}
	cookie := cookies.Cookies[0].Name + "=" + cookies.Cookies[0].Value
	csrf, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('meta[name="csrf-token"]').content`))
	if err != nil || len(csrf) < 40 {
		t.Fatalf("the page's CSRF token: %q, %v", csrf, err)
	}
	o = ok(call, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "keep me queued", "wait": false})
	keep, _ := o["ticket"].(string)
	good := map[string]string{"Content-Type": "application/json", "Cookie": cookie, dashboard.CSRFHeader: csrf, "Origin": base}
	with := func(k, v string) map[string]string {
		h := maps.Clone(good)
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"another site", with("Origin", "http://evil.example"), http.StatusForbidden},
		{"another local origin", with("Origin", "http://127.0.0.1:1"), http.StatusForbidden},
		{"no Origin", with("Origin", ""), http.StatusForbidden},
		{"no login", with("Cookie", ""), http.StatusUnauthorized},
	} {
		if got := replay(t, base, "cancel", `{"ticket":"`+keep+`"}`, tc.headers); got != tc.want {
			t.Errorf("a cancel replayed from %s: %d; want %d", tc.name, got, tc.want)
		}
		if got := replay(t, base, "send", `{"to":"m1","brief":"forged"}`, tc.headers); got != tc.want {
			t.Errorf("a send replayed from %s: %d; want %d", tc.name, got, tc.want)
		}
	}
	if p := ok(call, t, f.lead, "fleet_poll", map[string]any{"ticket": keep}); p["state"] != "queued" {
		t.Fatalf("the ticket after the refused replays = %v; want still queued", p)
	}
	if msg := ok(call, t, f.m1, "fleet_next", map[string]any{"wait_s": 10}); msg["content"] != "keep me queued" {
		t.Fatalf("m1's next message = %v; want the ticket the replays could not cancel", msg)
	}
	ok(call, t, f.m1, "fleet_reply", map[string]any{"content": "kept"})
	if n := ok(call, t, f.m1, "fleet_next", map[string]any{"wait_s": 0.2}); n["outcome"] != "none" {
		t.Fatalf("m1's fleet_next after the replays = %v; want none: no forged send", n)
	}

	// A phone's width: nothing scrolls sideways, and the question's
	// controls are on screen and work.
	o = ok(call, t, f.lead, "fleet_send", map[string]any{"to": "m1", "content": "check the phone layout", "wait": false})
	phoneTicket, _ := o["ticket"].(string)
	ok(call, t, f.m1, "fleet_next", map[string]any{"wait_s": 10})
	asked = async(call, t, f.m1, "fleet_ask", map[string]any{"question": "may I rename " + strings.Repeat("internal/fleetwatch/", 6) + "?", "default": "no"})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#conn", "live")
	prow := fmt.Sprintf("#tickets tr[data-ticket=%q]", phoneTicket)
	waitText(t, ctx, prow, "may I rename")
	waitText(t, ctx, "#turns", "check the phone layout", "count the files in cmd/")
	fitsPhone(t, ctx)
	typeRole(t, ctx, prow, "textbox", "Answer", "yes")
	clickRole(t, ctx, prow, "button", "Answer")
	if a := recvWithin(t, asked, 10*time.Second); a["answer"] != "yes" {
		t.Fatalf("fleet_ask answered at a phone's width = %v", a)
	}
	ok(call, t, f.m1, "fleet_reply", map[string]any{"content": "renamed"})

	// A lead's login: controls on its own tickets only. The operator's
	// queued send has no Cancel; the lead's own has one, and it works.
	typeRole(t, ctx, "#send", "textbox", "Brief", "the operator's queued task")
	clickRole(t, ctx, "#send", "button", "Send")
	waitText(t, ctx, "#tickets", "the operator's queued task")
	o = ok(call, t, f.lead, "fleet_send", map[string]any{"to": "m2", "content": "the lead's queued task", "wait": false})
	own, _ := o["ticket"].(string)
	cmd := exec.Command(binary, "web", "--url", f.d.url)
	cmd.Env = append(os.Environ(), "FLEET_TOKEN="+f.tokens["lead"])
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fleetstate web --url with the lead's token: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(strings.TrimSpace(string(out)))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#actor", "as lead lead")
	waitText(t, ctx, "#tickets", "the operator's queued task", "the lead's queued task")
	buttons := `[...document.querySelectorAll('#tickets tr')].filter((r) => r.innerText.includes(%q)).map((r) => r.querySelectorAll('button').length).join()`
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(buttons, "the operator's queued task"))); err != nil || n != "0" {
		t.Fatalf("the lead's page has %q buttons on the operator's ticket (%v); want none", n, err)
	}
	clickRole(t, ctx, fmt.Sprintf("#tickets tr[data-ticket=%q]", own), "button", "Cancel")
	if p := ok(call, t, f.lead, "fleet_poll", map[string]any{"ticket": own, "wait_s": 10}); p["reason"] != "cancelled" {
		t.Fatalf("the lead's poll after its login's cancel = %v; want cancelled", p)
	}

	// Log out: the page asks for a login, and reloading it does too.
	clickRole(t, ctx, "header", "button", "Log out")
	// The page navigates meanwhile: each look is an evaluation of its own.
	if !fleettest.Until(15*time.Second, 50*time.Millisecond, func() bool {
		out, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('#needlogin')`))
		return err == nil && out
	}) {
		t.Fatalf("the page after Log out never asked for a login; it shows:\n%s", textOf(ctx, "body"))
	}
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#needlogin", "needs a login")
}

// TestDashboardMergesWorkInChromium brings up a fleet whose member alice
// has a git work tree of its own, and goes through its work in a real
// browser as the operator: its branch, the commits ahead, the files with
// their line counts and what is uncommitted show, escaped; a merge
// refused elsewhere refreshes the entry; the diff shows on request; a
// merge waits for its confirmation, is refused by the fleet file's check
// with its output and nothing changed, and once the work is fixed is
// done, by the operator, of the commit the page showed: refused once
// the member committed since, then merged, and the lead's branch is at
// the commit the page shows.
func TestDashboardMergesWorkInChromium(t *testing.T) {
	ctx := browserTab(t)
	f, project, tree, up := worktreeFleet(t, map[string]any{"check": "if test -e broken; then echo the build is broken; exit 1; fi"})
	up()
	commitFile(t, tree, "alice.txt", "alice's work\u200b\nsecond line\n")
	commitFile(t, tree, "notes\u202etxt.exe", "x\n")
	into := gitIn(t, project, "branch", "--show-current")
	head := gitIn(t, project, "rev-parse", "HEAD")

	if err := chromedp.Do(ctx, chromedp.Navigate(webLogin(t, f.dir))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#conn", "live")
	entry := `#work article[data-work="alice"]`
	waitText(t, ctx, entry, "branch alice → "+into, "2 ahead, 0 behind", "alice.txt", "+2", `notes\u202etxt.exe`, "nothing uncommitted")

	// The lead's merge, refused for the uncommitted file, is an event
	// that refreshes the entry: the commit made since shows, and the file.
	commitFile(t, tree, "broken", "")
	if err := os.WriteFile(filepath.Join(tree, "scratch.txt"), []byte("draft\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fleetCLIFail(t, "merge", "alice", "--dir", f.dir)
	waitText(t, ctx, entry, "3 ahead", "broken", "uncommitted: scratch.txt")
	if err := os.Remove(filepath.Join(tree, "scratch.txt")); err != nil {
		t.Fatal(err)
	}
	clickRole(t, ctx, entry, "button", "Refresh")
	waitText(t, ctx, entry, "nothing uncommitted")

	clickRole(t, ctx, entry, "button", "Show diff")
	waitText(t, ctx, entry, "the diff, ", `+alice's work\u200b`, "+second line")
	if s := textOf(ctx, entry); strings.ContainsAny(s, "\u200b\u202e") {
		t.Errorf("alice's entry shows a hidden character raw:\n%s", s)
	}

	// Merge asks first; Not now leaves everything as it was.
	clickRole(t, ctx, entry, "button", "Merge")
	waitText(t, ctx, entry, "Merge alice at "+gitIn(t, tree, "rev-parse", "HEAD")[:12]+" (3 commits, 3 files) into "+into+" in the lead's checkout?")
	clickRole(t, ctx, entry, "button", "Not now")
	clickRole(t, ctx, entry, "button", "Merge")
	clickRole(t, ctx, entry, "button", "Confirm merge")
	waitText(t, ctx, entry, "refused, nothing changed: check_failed", "the check's output ends:", "the build is broken")
	if now := gitIn(t, project, "rev-parse", "HEAD"); now != head {
		t.Fatalf("a refused merge moved the lead to %s", now)
	}

	gitIn(t, tree, "rm", "--quiet", "broken")
	gitIn(t, tree, "commit", "--quiet", "-m", "fixed")
	clickRole(t, ctx, entry, "button", "Refresh")
	waitText(t, ctx, entry, "4 ahead")
	clickRole(t, ctx, entry, "button", "Merge")
	waitText(t, ctx, entry, "(4 commits, 2 files)")
	commitFile(t, tree, "late.txt", "after the question\n")
	clickRole(t, ctx, entry, "button", "Confirm merge")
	waitText(t, ctx, entry, "refused, nothing changed: branch_moved", "5 ahead", "late.txt")
	if now := gitIn(t, project, "rev-parse", "HEAD"); now != head {
		t.Fatalf("a merge of a commit the branch left moved the lead to %s", now)
	}
	clickRole(t, ctx, entry, "button", "Merge")
	clickRole(t, ctx, entry, "button", "Confirm merge")
	waitText(t, ctx, entry, "merged alice into "+into+", now at")
	shown := textOf(ctx, entry+" code.commit")
	if now := gitIn(t, project, "rev-parse", "HEAD"); now == head || now != shown {
		t.Fatalf("the lead is at %s after the merge; the page says %q", now, shown)
	}
	if _, err := os.Stat(filepath.Join(project, "alice.txt")); err != nil {
		t.Errorf("alice's work is not in the lead's checkout: %v", err)
	}
	waitText(t, ctx, entry, "0 ahead")
	waitText(t, ctx, "#events", "merge_refused", "merged", "by "+mcpadapter.OperatorAgent)

	// At a phone's width the entry, its files and its diff still fit.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#conn", "live")
	waitText(t, ctx, entry, "0 ahead", "nothing uncommitted")
	commitFile(t, tree, "wide.txt", strings.Repeat("a-long-line-without-a-break/", 20)+"\n")
	clickRole(t, ctx, entry, "button", "Refresh")
	// The reading moves the buttons down as it lands: a click at where
	// Show diff was a moment before finds the files' table.
	waitText(t, ctx, entry, "wide.txt")
	clickRole(t, ctx, entry, "button", "Show diff")
	waitText(t, ctx, entry, "wide.txt", "+a-long-line-without-a-break/")
	fitsPhone(t, ctx)
}
