package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/events"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/dashboard"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

const testOperator = "fso_operator-token-of-the-test"

// dash is a dashboard served on 127.0.0.1 beside the event stream, as the
// daemon mounts them, with a clock the test moves.
type dash struct {
	t       *testing.T
	srv     *httptest.Server
	d       *dashboard.Dashboard
	rv      *fleetstate.Rendezvous
	tokens  *auth.Tokens
	leadTok string
	scout   string // the member's token

	mu  sync.Mutex
	now time.Time
	// leadsDecide is the fleet file's word on leads deciding permission
	// requests.
	leadsDecide atomic.Bool
}

func newDash(t *testing.T) *dash {
	t.Helper()
	return newDashWith(t, nil)
}

// newDashWith is newDash with work as the dashboard's work trees.
func newDashWith(t *testing.T, work dashboard.Work) *dash {
	t.Helper()
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.OpenTokens(st)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := &dash{t: t, rv: rv, tokens: tokens, now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	if x.leadTok, err = tokens.Add("lead", mcpadapter.RoleLead); err != nil {
		t.Fatal(err)
	}
	if x.scout, err = tokens.Add("scout", mcpadapter.RoleMember); err != nil {
		t.Fatal(err)
	}
	if err := rv.AddMember("scout", nil); err != nil {
		t.Fatal(err)
	}
	x.d = dashboard.New(rv, &dashboard.Options{Operator: testOperator, Tokens: tokens, Version: "test",
		LeadsDecide: x.leadsDecide.Load, Work: work})
	dashboard.SetClock(x.d, func() time.Time {
		x.mu.Lock()
		defer x.mu.Unlock()
		return x.now
	})
	mux := http.NewServeMux()
	mux.Handle(events.Path, events.Handler(rv, events.Options{Tokens: tokens, Operator: testOperator, Authorize: x.d.Authorized}))
	mux.Handle(dashboard.Path, x.d)
	x.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		rv.Close()
		x.srv.Close()
		x.d.Close()
	})
	return x
}

func (x *dash) advance(d time.Duration) {
	x.mu.Lock()
	x.now = x.now.Add(d)
	x.mu.Unlock()
}

// code asks for a login code with token and returns the login path.
func (x *dash) code(token string) (string, int) {
	x.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, x.srv.URL+dashboard.Path+"code", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		x.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Code  string `json:"code"`
		Login string `json:"login"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode == http.StatusOK && (out.Code == "" || out.Login != dashboard.Path+"login?code="+out.Code) {
		x.t.Fatalf("code answer %+v", out)
	}
	return out.Login, resp.StatusCode
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so that the login's answer can be looked at.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// login redeems login (a path) in c and returns the answer.
func (x *dash) login(c *http.Client, login string) *http.Response {
	x.t.Helper()
	resp, _ := get(x.t, c, x.srv.URL+login)
	return resp
}

func (x *dash) loggedIn(c *http.Client) *http.Client {
	x.t.Helper()
	login, status := x.code(testOperator)
	if status != http.StatusOK {
		x.t.Fatalf("code: %d", status)
	}
	if resp := x.login(c, login); resp.StatusCode != http.StatusSeeOther {
		x.t.Fatalf("login: %s", resp.Status)
	}
	return c
}

func TestDashboardLogin(t *testing.T) {
	x := newDash(t)
	c := browser(t)
	login, status := x.code(testOperator)
	if status != http.StatusOK {
		t.Fatalf("code with the operator token: %d", status)
	}
	resp := x.login(c, login)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != dashboard.Path {
		t.Fatalf("login: %s to %q; want 303 to %s", resp.Status, resp.Header.Get("Location"), dashboard.Path)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies; want 1", len(cookies))
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure || ck.MaxAge <= 0 || len(ck.Value) < 40 {
		t.Errorf("cookie %+v; want HttpOnly, SameSite=Strict, Path=/, a max age and a long random value", ck)
	}
	if _, port, _ := strings.Cut(strings.TrimPrefix(x.srv.URL, "http://"), ":"); ck.Name != "fleetstate_"+port {
		t.Errorf("cookie name %q; want fleetstate_%s", ck.Name, port)
	}
	page, body := get(t, c, x.srv.URL+dashboard.Path)
	if page.StatusCode != http.StatusOK || !strings.Contains(body, `data-member="scout"`) || !strings.Contains(body, "/dashboard/static/app.js") {
		t.Fatalf("page: %s\n%s", page.Status, body)
	}
	for _, asset := range []string{"static/app.js", "static/textsafe.js", "static/app.css", "static/icon.svg"} {
		if resp, _ := get(t, c, x.srv.URL+dashboard.Path+asset); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", asset, resp.Status)
		}
	}
	// The cookie opens the event stream too.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, x.srv.URL+events.Path, nil)
	ev, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, len("event: snapshot"))
	_, err = io.ReadFull(ev.Body, first)
	cancel()
	ev.Body.Close()
	if ev.StatusCode != http.StatusOK || err != nil || string(first) != "event: snapshot" {
		t.Fatalf("events with the cookie: %s, %q, %v", ev.Status, first, err)
	}
	// A lead's token may ask for a code too; a member's, a wrong one or
	// none may not, and a code is only made by POST.
	if _, status := x.code(x.leadTok); status != http.StatusOK {
		t.Errorf("code with the lead's token: %d; want 200", status)
	}
	for name, tok := range map[string]string{"member": x.scout, "wrong": "fso_nope", "none": ""} {
		if _, status := x.code(tok); status != http.StatusUnauthorized {
			t.Errorf("code with the %s token: %d; want 401", name, status)
		}
	}
	if resp, _ := get(t, http.DefaultClient, x.srv.URL+dashboard.Path+"code"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET code: %s; want 405", resp.Status)
	}
}

func TestDashboardRefusesCodes(t *testing.T) {
	x := newDash(t)
	good, _ := x.code(testOperator)
	expiring, _ := x.code(testOperator)
	for _, tc := range []struct {
		name, login string
		before      func()
	}{
		{name: "none", login: dashboard.Path + "login"},
		{name: "empty", login: dashboard.Path + "login?code="},
		{name: "wrong", login: dashboard.Path + "login?code=" + url.QueryEscape("not-a-code")},
		{name: "good code cut short", login: good[:len(good)-1]},
		{name: "overlong", login: dashboard.Path + "login?code=" + strings.Repeat("a", 4096)},
		{name: "reused", login: good, before: func() {
			if resp := x.login(browser(t), good); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("first use: %s", resp.Status)
			}
		}},
		{name: "expired", login: expiring, before: func() { x.advance(dashboard.DefaultLoginCodeTTL) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			c := browser(t)
			resp, body := get(t, c, x.srv.URL+tc.login)
			if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(body, "fleetstate web") {
				t.Fatalf("login: %s, cookies %v; want 401, none, and a page naming fleetstate web:\n%s", resp.Status, resp.Cookies(), body)
			}
			if resp, _ := get(t, c, x.srv.URL+dashboard.Path); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("page after a refused login: %s; want 401", resp.Status)
			}
		})
	}
}

func TestDashboardNothingWithoutCookie(t *testing.T) {
	x := newDash(t)
	c := browser(t)
	forged := browser(t)
	u, _ := url.Parse(x.srv.URL)
	_, port, _ := strings.Cut(u.Host, ":")
	forged.Jar.SetCookies(u, []*http.Cookie{{Name: "fleetstate_" + port, Value: "forged-session-value-of-the-right-length-0123456789"}})
	paths := []string{dashboard.Path, dashboard.Path + "static/app.js", dashboard.Path + "static/app.css",
		dashboard.Path + "transcripts", dashboard.Path + "changes?member=scout", dashboard.Path + "nope", events.Path}
	for name, cl := range map[string]*http.Client{"no cookie": c, "forged cookie": forged} {
		for _, p := range paths {
			resp, body := get(t, cl, x.srv.URL+p)
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "scout") || strings.Contains(body, "EventSource") {
				t.Errorf("%s, GET %s: %s\n%s; want 401 and nothing of the fleet", name, p, resp.Status, body)
			}
		}
	}
	resp, body := get(t, c, x.srv.URL+dashboard.Path)
	if !strings.Contains(body, "fleetstate web") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("the refusal page does not say to run fleetstate web:\n%s", body)
	}
}

func TestDashboardHeaders(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	for _, p := range []string{dashboard.Path, dashboard.Path + "static/app.js", dashboard.Path + "login?code=x"} {
		resp, _ := get(t, c, x.srv.URL+p)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "http") {
			t.Errorf("GET %s: Content-Security-Policy %q allows inline code or another origin", p, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: headers %v", p, resp.Header)
		}
	}
	// No asset names another origin: the page loads nothing from outside.
	for _, p := range []string{"", "static/app.js", "static/app.css"} {
		_, body := get(t, c, x.srv.URL+dashboard.Path+p)
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") || strings.Contains(body, "//cdn") {
			t.Errorf("%s names another origin:\n%s", p, body)
		}
	}
}

func TestDashboardRebinding(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	for name, set := range map[string]func(*http.Request){
		"host":   func(r *http.Request) { r.Host = "evil.example:80" },
		"origin": func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") },
	} {
		for _, p := range []string{dashboard.Path, dashboard.Path + "login?code=x"} {
			req, _ := http.NewRequest(http.MethodGet, x.srv.URL+p, nil)
			set(req)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s not local, GET %s: %s; want 403", name, p, resp.Status)
			}
		}
	}
}

func TestDashboardSessionExpires(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	x.advance(dashboard.DefaultSessionTTL - time.Second)
	if resp, _ := get(t, c, x.srv.URL+dashboard.Path); resp.StatusCode != http.StatusOK {
		t.Fatalf("page before the session's end: %s", resp.Status)
	}
	x.advance(time.Second)
	if resp, _ := get(t, c, x.srv.URL+dashboard.Path); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("page after the session's end: %s; want 401", resp.Status)
	}
}

func TestDashboardLeadSessionEndsWithToken(t *testing.T) {
	x := newDash(t)
	c := browser(t)
	login, _ := x.code(x.leadTok)
	if resp := x.login(c, login); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", resp.Status)
	}
	if resp, _ := get(t, c, x.srv.URL+dashboard.Path); resp.StatusCode != http.StatusOK {
		t.Fatalf("page: %s", resp.Status)
	}
	if _, err := x.tokens.Revoke("lead"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, c, x.srv.URL+dashboard.Path); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("page after the lead's token was revoked: %s; want 401", resp.Status)
	}
}

// The transcripts keep what the snapshot cannot tell: the questions and
// answers of each turn, in order.
func TestDashboardTranscripts(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	ctx := context.Background()
	if err := x.rv.SetReady("scout", true); err != nil {
		t.Fatal(err)
	}
	o, err := x.rv.SendDetached("lead", "scout", "count the TODOs")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := x.rv.Next(ctx, "scout", time.Second); !ok || err != nil {
		t.Fatalf("Next: %v %v", ok, err)
	}
	asked := make(chan string, 1)
	go func() {
		text, _, _ := x.rv.Ask(ctx, "scout", "in which package?", "all")
		asked <- text
	}()
	var turn string
	if !fleettest.Until(5*time.Second, 5*time.Millisecond, func() bool {
		p, err := x.rv.Poll(ctx, "lead", o.Ticket, 0)
		turn = p.TurnID
		return err == nil && p.State == fleetstate.TicketQuestion
	}) {
		t.Fatal("the question never showed on the ticket")
	}
	// Answer waits for what follows, as a blocking send does.
	answered := make(chan fleetstate.Outcome, 1)
	go func() {
		o, _ := x.rv.Answer(ctx, "lead", turn, "the root")
		answered <- o
	}()
	if got := <-asked; got != "the root" {
		t.Fatalf("Ask = %q", got)
	}
	if err := x.rv.Reply("scout", "7 TODOs"); err != nil {
		t.Fatal(err)
	}
	if o := <-answered; o.Kind != fleetstate.OutcomeReply {
		t.Fatalf("Answer = %+v; want the reply", o)
	}
	seq := x.rv.Snapshot().Seq
	_, body := get(t, c, x.srv.URL+dashboard.Path+"transcripts?after="+jsonNumber(seq))
	var v struct {
		Seq   uint64 `json:"seq"`
		Turns []struct {
			TurnID  string `json:"turn_id"`
			Member  string `json:"member"`
			Entries []struct {
				Kind    string `json:"kind"`
				Content string `json:"content"`
				Outcome string `json:"outcome"`
			} `json:"entries"`
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if v.Seq < seq || len(v.Turns) != 1 || v.Turns[0].TurnID != turn || v.Turns[0].Member != "scout" {
		t.Fatalf("transcripts %s; want seq ≥ %d and one turn %s", body, seq, turn)
	}
	var got []string
	for _, e := range v.Turns[0].Entries {
		got = append(got, e.Kind+":"+e.Outcome+":"+e.Content)
	}
	want := []string{"brief::count the TODOs", "question::in which package?", "answer::the root", "outcome:reply:7 TODOs"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("transcript %q; want %q", got, want)
	}
	// A fresh dashboard seeds its transcripts from the snapshot: the
	// brief and the held outcome.
	d2 := dashboard.New(x.rv, nil)
	defer d2.Close()
	if n := dashboard.Turns(d2); n != 1 {
		t.Errorf("a new dashboard holds %d turns; want 1 from the snapshot", n)
	}
}

func jsonNumber(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// Codes asked in a loop hold bounded memory: past the bound, a new code
// drops the oldest.
func TestDashboardCodesBounded(t *testing.T) {
	x := newDash(t)
	first, _ := x.code(testOperator)
	var last string
	for range 16 {
		last, _ = x.code(testOperator)
	}
	if resp := x.login(browser(t), first); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the oldest of 17 codes: %s; want 401, dropped", resp.Status)
	}
	if resp := x.login(browser(t), last); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the newest code: %s; want 303", resp.Status)
	}
}

// TestDashboardBoundsPerPrincipal: login codes and logins are bounded per
// principal: a lead asking for codes, or logging in, past the bounds drops
// its own oldest, never the operator's code or login.
func TestDashboardBoundsPerPrincipal(t *testing.T) {
	x := newDash(t)
	operatorLogin, _ := x.code(testOperator)
	operator := x.loggedIn(browser(t))
	leadFirst, _ := x.code(x.leadTok)
	for range 16 {
		x.code(x.leadTok)
	}
	if resp := x.login(browser(t), leadFirst); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the lead's oldest of 17 codes: %s; want 401, dropped", resp.Status)
	}
	if resp := x.login(browser(t), operatorLogin); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the operator's code after 17 of the lead's: %s; want 303", resp.Status)
	}
	first := x.leadLogin(browser(t), x.leadTok)
	for range 64 {
		x.leadLogin(browser(t), x.leadTok)
	}
	for _, c := range []struct {
		name   string
		client *http.Client
		want   int
	}{
		{"the operator's login", operator, http.StatusOK},
		{"the lead's oldest of 65 logins", first, http.StatusUnauthorized},
	} {
		if resp, _ := get(t, c.client, x.srv.URL+dashboard.Path); resp.StatusCode != c.want {
			t.Errorf("%s after 65 of the lead's: %s; want %d", c.name, resp.Status, c.want)
		}
	}
}
