package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fleetstate/fleetstate/internal/fleettest"
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
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("%s never showed %q (%v); it shows:\n%s", sel, want, err, textOf(ctx, sel))
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
	ok(call, t, f.m1, "fleet_reply", map[string]any{"content": "31 files, 12 of them tests"})
	if r := recvWithin(t, answered, 10*time.Second); r["outcome"] != "reply" {
		t.Fatalf("answer's outcome = %v", r)
	}
	waitText(t, ctx, "#tickets", "done", "reply")
	waitText(t, ctx, "#events", "asked", "answered", "outcome")
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
	if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`details[data-turn=%q] summary`, turn))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#turns", "including tests?", "yes, tests too", "31 files, 12 of them tests")

	// Another delegation left open, for the picture: m2 at work.
	ok(call, t, f.lead, "fleet_send", map[string]any{"to": "m2", "content": "update the README's install line", "wait": false})
	ok(call, t, f.m2, "fleet_next", map[string]any{"wait_s": 10})
	waitText(t, ctx, "#members", "m2")
	waitText(t, ctx, "#tickets", "update the README's install line", "working")

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
