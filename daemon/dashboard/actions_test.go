package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/dashboard"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// csrfMeta finds the login's CSRF token in the dashboard's page.
var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// csrfOf returns the CSRF token of c's login, from the page.
func (x *dash) csrfOf(c *http.Client) string {
	x.t.Helper()
	resp, body := get(x.t, c, x.srv.URL+dashboard.Path)
	m := csrfMeta.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil || len(m[1]) < 40 {
		x.t.Fatalf("page: %s, no CSRF token in it:\n%s", resp.Status, body)
	}
	return m[1]
}

// leadLogin logs c in with the token of lead.
func (x *dash) leadLogin(c *http.Client, token string) *http.Client {
	x.t.Helper()
	login, status := x.code(token)
	if status != http.StatusOK {
		x.t.Fatalf("code: %d", status)
	}
	if resp := x.login(c, login); resp.StatusCode != http.StatusSeeOther {
		x.t.Fatalf("login: %s", resp.Status)
	}
	return c
}

// action posts body to the action path as the page does, with edit
// changing the request first; it returns the status and the body.
func (x *dash) action(c *http.Client, csrf, path, body string, edit func(*http.Request)) (int, string) {
	x.t.Helper()
	req, err := http.NewRequest(http.MethodPost, x.srv.URL+dashboard.Path+path, strings.NewReader(body))
	if err != nil {
		x.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", x.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set(dashboard.CSRFHeader, csrf)
	if edit != nil {
		edit(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		x.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// queued sends a detached task from lead to scout and returns its ticket.
func (x *dash) queued(lead, brief string) string {
	x.t.Helper()
	if err := x.rv.SetReady("scout", true); err != nil {
		x.t.Fatal(err)
	}
	o, err := x.rv.SendDetached(lead, "scout", brief)
	if err != nil {
		x.t.Fatal(err)
	}
	return o.Ticket
}

// state returns where lead's ticket stands.
func (x *dash) state(lead, ticket string) fleetstate.Outcome {
	x.t.Helper()
	o, err := x.rv.Poll(context.Background(), lead, ticket, 0)
	if err != nil {
		x.t.Fatalf("poll %s: %v", ticket, err)
	}
	return o
}

// asking makes scout take its next message and ask a question in it, and
// returns the turn and a channel with what Ask returns.
func (x *dash) asking(lead, ticket, question string) (string, <-chan string) {
	x.t.Helper()
	ctx := context.Background()
	msg, ok, err := x.rv.Next(ctx, "scout", time.Second)
	if !ok || err != nil {
		x.t.Fatalf("Next: %v %v", ok, err)
	}
	asked := make(chan string, 1)
	go func() {
		text, _, err := x.rv.Ask(ctx, "scout", question, "")
		if err != nil {
			text = "error: " + err.Error()
		}
		asked <- text
	}()
	if !fleettest.Until(5*time.Second, 5*time.Millisecond, func() bool { return x.state(lead, ticket).State == fleetstate.TicketQuestion }) {
		x.t.Fatal("the question never showed on the ticket")
	}
	return msg.TurnID, asked
}

func TestDashboardAnswer(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	csrf := x.csrfOf(c)
	ticket := x.queued("lead", "count the TODOs")
	turn, asked := x.asking("lead", ticket, "in which package?")

	status, body := x.action(c, csrf, "answer", `{"turn_id":"`+turn+`","answer":"the root one"}`, nil)
	if status != http.StatusOK {
		t.Fatalf("answer: %d %s", status, body)
	}
	select {
	case got := <-asked:
		if got != "the root one" {
			t.Fatalf("Ask returned %q; want the answer typed", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Ask never returned")
	}
	if o := x.state("lead", ticket); o.State != fleetstate.TicketWorking {
		t.Errorf("after the answer the lead's ticket is %+v; want working", o)
	}
	// The question is answered: a second answer is refused.
	if status, body := x.action(c, csrf, "answer", `{"turn_id":"`+turn+`","answer":"again"}`, nil); status != http.StatusConflict {
		t.Errorf("second answer: %d %s; want 409", status, body)
	}
}

func TestDashboardCancel(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	csrf := x.csrfOf(c)
	ticket := x.queued("lead", "never to be done")
	status, body := x.action(c, csrf, "cancel", `{"ticket":"`+ticket+`"}`, nil)
	if status != http.StatusOK || !strings.Contains(body, `"cancelled"`) {
		t.Fatalf("cancel: %d %s", status, body)
	}
	if o := x.state("lead", ticket); o.Kind != fleetstate.OutcomeFailed || o.Reason != fleetstate.ReasonCancelled {
		t.Errorf("the lead's ticket after the cancel: %+v; want failed (cancelled)", o)
	}
	if msg, ok, err := x.rv.Next(context.Background(), "scout", 50*time.Millisecond); ok || err != nil {
		t.Errorf("the member got %+v, %v after the cancel; want nothing", msg, err)
	}
}

func TestDashboardSend(t *testing.T) {
	x := newDash(t)
	for _, tc := range []struct {
		name, from string
		login      func(*http.Client) *http.Client
	}{
		{"operator", mcpadapter.OperatorAgent, x.loggedIn},
		{"lead", "lead", func(c *http.Client) *http.Client { return x.leadLogin(c, x.leadTok) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.login(browser(t))
			status, body := x.action(c, x.csrfOf(c), "send", `{"to":"scout","brief":"sweep the floor, `+tc.name+`"}`, nil)
			if status != http.StatusOK || !strings.Contains(body, `"ticket"`) {
				t.Fatalf("send: %d %s", status, body)
			}
			msg, ok, err := x.rv.Next(context.Background(), "scout", time.Second)
			if !ok || err != nil || msg.From != tc.from || msg.Content != "sweep the floor, "+tc.name {
				t.Fatalf("the member got %+v, %v, %v; want the brief from %s", msg, ok, err, tc.from)
			}
		})
	}
	c := x.loggedIn(browser(t))
	for name, body := range map[string]string{
		"unknown member": `{"to":"nobody","brief":"x"}`,
		"empty brief":    `{"to":"scout","brief":""}`,
		"unknown field":  `{"to":"scout","brief":"x","lead":"lead"}`,
		"not JSON":       `to=scout&brief=x`,
	} {
		if status, out := x.action(c, x.csrfOf(c), "send", body, nil); status < 400 || status >= 500 {
			t.Errorf("%s: %d %s; want a 4xx refusal", name, status, out)
		}
	}
	if snap := x.rv.Snapshot(); len(snap.Tickets) != 2 {
		t.Errorf("%d tickets after the refused sends; want the 2 sent", len(snap.Tickets))
	}
}

// The operator raises a spent budget from the page, and the held work
// goes on; a lead may not, a bad budget is refused, and null removes it.
func TestDashboardBudget(t *testing.T) {
	x := newDash(t)
	if err := x.rv.SetBudget("scout", &fleetstate.Budget{Tokens: 10}); err != nil {
		t.Fatal(err)
	}
	ticket := x.queued("lead", "held by the budget")
	if err := x.rv.ReportUsage("scout", fleetstate.UsageReport{Source: "s", Total: fleetstate.Usage{Output: 10}}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := x.rv.Next(context.Background(), "scout", 0); ok {
		t.Fatal("a member past its budget took work")
	}
	lead := x.leadLogin(browser(t), x.leadTok)
	if status, body := x.action(lead, x.csrfOf(lead), "budget", `{"member":"scout","budget":{"tokens":1000}}`, nil); status != http.StatusForbidden || !strings.Contains(body, "ERR_NOT_PERMITTED") {
		t.Errorf("a lead's budget: %d %s; want 403 ERR_NOT_PERMITTED", status, body)
	}
	c := x.loggedIn(browser(t))
	for _, bad := range []string{`{"member":"scout","budget":{"tokens":-5}}`, `{"member":"scout","budget":{"tokens":5,"cost":1}}`, `{"member":"a::b","budget":{"tokens":5}}`} {
		if status, body := x.action(c, x.csrfOf(c), "budget", bad, nil); status != http.StatusBadRequest {
			t.Errorf("budget %s: %d %s; want 400", bad, status, body)
		}
	}
	status, body := x.action(c, x.csrfOf(c), "budget", `{"member":"scout","budget":{"tokens":1000,"per":"day"}}`, nil)
	if status != http.StatusOK || !strings.Contains(body, `"tokens":1000`) || !strings.Contains(body, `"spent":10`) {
		t.Fatalf("the operator's raise: %d %s", status, body)
	}
	msg, ok, err := x.rv.Next(context.Background(), "scout", time.Second)
	if !ok || err != nil || msg.Content != "held by the budget" {
		t.Fatalf("after the raise, Next = %+v, %v, %v; want the held work of ticket %s", msg, ok, err, ticket)
	}
	if status, body := x.action(c, x.csrfOf(c), "budget", `{"member":"scout","budget":null}`, nil); status != http.StatusOK || body != "{\"budgets\":null}\n" {
		t.Errorf("remove: %d %q", status, body)
	}
}

// Every way an action may lack what it needs is refused, and changes
// nothing: the queued ticket stays queued.
func TestDashboardActionRefused(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	csrf := x.csrfOf(c)
	other := x.loggedIn(browser(t))
	otherCSRF := x.csrfOf(other)
	if otherCSRF == csrf {
		t.Fatal("two logins have the same CSRF token")
	}
	ticket := x.queued("lead", "keep me queued")
	cancel := `{"ticket":"` + ticket + `"}`
	for _, tc := range []struct {
		name   string
		client *http.Client
		csrf   string
		edit   func(*http.Request)
		want   int
	}{
		{"no cookie", browser(t), csrf, nil, http.StatusUnauthorized},
		{"no CSRF token", c, "", nil, http.StatusForbidden},
		{"wrong CSRF token", c, csrf[:len(csrf)-1] + "x", nil, http.StatusForbidden},
		{"another login's CSRF token", c, otherCSRF, nil, http.StatusForbidden},
		{"foreign Origin", c, csrf, func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, http.StatusForbidden},
		{"another local Origin", c, csrf, func(r *http.Request) { r.Header.Set("Origin", "http://127.0.0.1:1") }, http.StatusForbidden},
		{"null Origin", c, csrf, func(r *http.Request) { r.Header.Set("Origin", "null") }, http.StatusForbidden},
		{"cross-site fetch", c, csrf, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, http.StatusForbidden},
		{"no Origin, no Sec-Fetch-Site", c, csrf, func(r *http.Request) {
			r.Header.Del("Origin")
			r.Header.Del("Sec-Fetch-Site")
		}, http.StatusForbidden},
		{"form body", c, csrf, func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, http.StatusUnsupportedMediaType},
		{"GET", c, csrf, func(r *http.Request) { r.Method = http.MethodGet }, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, body := x.action(tc.client, tc.csrf, "cancel", cancel, tc.edit); status != tc.want {
				t.Fatalf("cancel: %d %s; want %d", status, body, tc.want)
			}
			if o := x.state("lead", ticket); o.State != fleetstate.TicketQueued {
				t.Fatalf("the ticket after a refused cancel: %+v; want queued", o)
			}
		})
	}
	// Without an Origin, a browser's same-origin fetch is let through.
	status, body := x.action(c, csrf, "cancel", cancel, func(r *http.Request) { r.Header.Del("Origin") })
	if status != http.StatusOK {
		t.Fatalf("same-origin cancel without an Origin: %d %s", status, body)
	}
}

// A lead's login acts on its own tickets only; the operator's on every
// lead's, as that lead.
func TestDashboardLeadActsOnOwnTickets(t *testing.T) {
	x := newDash(t)
	if _, err := x.tokens.Add("other", mcpadapter.RoleLead); err != nil {
		t.Fatal(err)
	}
	c := x.leadLogin(browser(t), x.leadTok)
	csrf := x.csrfOf(c)
	if _, body := get(t, c, x.srv.URL+dashboard.Path); !strings.Contains(body, "as lead lead") {
		t.Errorf("the lead's page does not say who acts:\n%s", body)
	}

	theirs := x.queued("other", "the other lead's task")
	turn, asked := x.asking("other", theirs, "which one?")
	if status, body := x.action(c, csrf, "answer", `{"turn_id":"`+turn+`","answer":"mine"}`, nil); status != http.StatusForbidden {
		t.Errorf("a lead answering another lead's question: %d %s; want 403", status, body)
	}
	if status, body := x.action(c, csrf, "cancel", `{"ticket":"`+theirs+`"}`, nil); status != http.StatusForbidden {
		t.Errorf("a lead cancelling another lead's ticket: %d %s; want 403", status, body)
	}
	if o := x.state("other", theirs); o.State != fleetstate.TicketQuestion {
		t.Fatalf("the other lead's ticket after the refusals: %+v; want its question still waiting", o)
	}

	// The operator answers it, as the other lead.
	op := x.loggedIn(browser(t))
	if status, body := x.action(op, x.csrfOf(op), "answer", `{"turn_id":"`+turn+`","answer":"the operator's"}`, nil); status != http.StatusOK {
		t.Fatalf("the operator's answer: %d %s", status, body)
	}
	if got := <-asked; got != "the operator's" {
		t.Fatalf("Ask = %q", got)
	}
	if err := x.rv.Reply("scout", "done"); err != nil {
		t.Fatal(err)
	}

	// Its own ticket, the lead may cancel.
	mine := x.queued("lead", "my task")
	if status, body := x.action(c, csrf, "cancel", `{"ticket":"`+mine+`"}`, nil); status != http.StatusOK {
		t.Fatalf("a lead cancelling its own ticket: %d %s", status, body)
	}
	if o := x.state("lead", mine); o.Reason != fleetstate.ReasonCancelled {
		t.Errorf("the lead's own ticket: %+v; want cancelled", o)
	}
}

// Dismiss acks a finished ticket the login itself sent, and no other.
func TestDashboardAck(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	csrf := x.csrfOf(c)
	if !strings.Contains(func() string { _, b := get(t, c, x.srv.URL+dashboard.Path); return b }(),
		`<meta name="fleetstate-sender" content="`+mcpadapter.OperatorAgent+`">`) {
		t.Error("the operator's page does not name the lead it sends as")
	}
	ctx := context.Background()
	done := func(lead, brief string) string {
		ticket := x.queued(lead, brief)
		if _, ok, err := x.rv.Next(ctx, "scout", time.Second); !ok || err != nil {
			t.Fatalf("Next: %v %v", ok, err)
		}
		if err := x.rv.Reply("scout", "done: "+brief); err != nil {
			t.Fatal(err)
		}
		return ticket
	}
	mine := done(mcpadapter.OperatorAgent, "the operator's task")
	theirs := done("lead", "the lead's task")
	open := x.queued(mcpadapter.OperatorAgent, "still queued")

	if status, body := x.action(c, csrf, "ack", `{"ticket":"`+theirs+`"}`, nil); status != http.StatusForbidden {
		t.Errorf("the operator acking a lead's ticket: %d %s; want 403", status, body)
	}
	if o := x.state("lead", theirs); o.Kind != fleetstate.OutcomeReply {
		t.Errorf("the lead's ticket after the refused ack: %+v; want its reply held", o)
	}
	if status, body := x.action(c, csrf, "ack", `{"ticket":"`+open+`"}`, nil); status != http.StatusConflict {
		t.Errorf("acking a queued ticket: %d %s; want 409", status, body)
	}
	if status, body := x.action(c, csrf, "ack", `{"ticket":"`+mine+`"}`, nil); status != http.StatusOK {
		t.Fatalf("the operator acking its own finished ticket: %d %s", status, body)
	}
	if _, err := x.rv.Poll(ctx, mcpadapter.OperatorAgent, mine, 0); fleetstate.CodeOf(err) != fleetstate.CodeUnknownTicket {
		t.Errorf("the acked ticket still polls: %v", err)
	}
}

// A body over the bound is refused before it is read whole.
func TestDashboardActionBodyBounded(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	body := `{"to":"scout","brief":"` + strings.Repeat("a", 1<<20) + `"}`
	if status, out := x.action(c, x.csrfOf(c), "send", body, nil); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a send of over 1 MiB: %d %.200s; want 413", status, out)
	}
	if n := len(x.rv.Snapshot().Tickets); n != 0 {
		t.Fatalf("%d tickets after the refused send; want none", n)
	}
}

// TestDashboardDecide: the operator's login allows one permission request
// and denies another with a message, and the member's RequestPermission
// returns each decision; a lead's login, and a request without the CSRF
// token, are refused and decide nothing; a decided request is refused.
func TestDashboardDecide(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	csrf := x.csrfOf(c)
	ask := func(cmd string) (string, <-chan fleetstate.Decision) {
		ch := make(chan fleetstate.Decision, 1)
		go func() {
			d, _, _ := x.rv.RequestPermission(context.Background(), "scout",
				fleetstate.PermissionRequest{Tool: "Bash", Input: `{"command":"` + cmd + `"}`, Timeout: time.Minute})
			ch <- d
		}()
		var id string
		if !fleettest.Until(5*time.Second, 5*time.Millisecond, func() bool {
			for _, p := range x.rv.PermissionRequests() {
				if strings.Contains(p.Input, cmd) {
					id = p.ID
				}
			}
			return id != ""
		}) {
			t.Fatalf("the request for %s never showed", cmd)
		}
		return id, ch
	}
	decided := func(ch <-chan fleetstate.Decision) fleetstate.Decision {
		select {
		case d := <-ch:
			return d
		case <-time.After(5 * time.Second):
			t.Fatal("RequestPermission never returned")
		}
		return fleetstate.Decision{}
	}

	id, ch := ask("go test ./...")
	lead := x.leadLogin(browser(t), x.leadTok)
	if status, body := x.action(lead, x.csrfOf(lead), "decide", `{"id":"`+id+`","behavior":"allow"}`, nil); status != http.StatusForbidden {
		t.Errorf("a lead's login deciding: %d %s; want 403", status, body)
	}
	if status, _ := x.action(c, "", "decide", `{"id":"`+id+`","behavior":"allow"}`, nil); status != http.StatusForbidden {
		t.Errorf("deciding without the CSRF token: %d; want 403", status)
	}
	if n := len(x.rv.PermissionRequests()); n != 1 {
		t.Fatalf("pending after the refusals: %d; want the request still pending", n)
	}
	if status, body := x.action(c, csrf, "decide", `{"id":"`+id+`","behavior":"allow"}`, nil); status != http.StatusOK {
		t.Fatalf("allow: %d %s", status, body)
	}
	if d := decided(ch); d.Behavior != fleetstate.BehaviorAllow {
		t.Errorf("the member got %+v; want allow", d)
	}
	if status, _ := x.action(c, csrf, "decide", `{"id":"`+id+`","behavior":"deny"}`, nil); status < 400 {
		t.Errorf("deciding a decided request: %d; want refused", status)
	}

	id, ch = ask("rm -rf build")
	if status, body := x.action(c, csrf, "decide", `{"id":"`+id+`","behavior":"deny","message":"shared folder"}`, nil); status != http.StatusOK {
		t.Fatalf("deny: %d %s", status, body)
	}
	if d := decided(ch); d.Behavior != fleetstate.BehaviorDeny || d.Message != "shared folder" {
		t.Errorf("the member got %+v; want deny, shared folder", d)
	}

	// Where the fleet file lets leads decide, a lead's login may, and the
	// decision is the lead's.
	x.leadsDecide.Store(true)
	id, ch = ask("git status")
	if status, body := x.action(lead, x.csrfOf(lead), "decide", `{"id":"`+id+`","behavior":"allow"}`, nil); status != http.StatusOK {
		t.Fatalf("a lead's login deciding where leads may: %d %s", status, body)
	}
	if d := decided(ch); d.Behavior != fleetstate.BehaviorAllow || d.By != "lead" {
		t.Errorf("the member got %+v; want allow, by lead", d)
	}
}

// TestDashboardDecideAnswersAsPermissions: /dashboard/decide answers an
// unknown and a decided request as /permissions does, 404 and 409 with
// the code, for the operator's login and for a lead's where leads decide.
func TestDashboardDecideAnswersAsPermissions(t *testing.T) {
	for _, who := range []string{"operator", "lead"} {
		t.Run(who, func(t *testing.T) {
			x := newDash(t)
			x.leadsDecide.Store(true)
			c := x.loggedIn(browser(t))
			if who == "lead" {
				c = x.leadLogin(browser(t), x.leadTok)
			}
			csrf := x.csrfOf(c)
			go func() {
				_, _, _ = x.rv.RequestPermission(context.Background(), "scout", fleetstate.PermissionRequest{Tool: "Bash", Timeout: time.Minute})
			}()
			var id string
			if !fleettest.Until(5*time.Second, 5*time.Millisecond, func() bool {
				if p := x.rv.PermissionRequests(); len(p) == 1 {
					id = p[0].ID
				}
				return id != ""
			}) {
				t.Fatal("the request never showed")
			}
			if status, body := x.action(c, csrf, "decide", `{"id":"`+id+`","behavior":"allow"}`, nil); status != http.StatusOK {
				t.Fatalf("allow: %d %s", status, body)
			}
			for _, k := range []struct {
				name, id, code string
				status         int
			}{
				{"decided", id, "ERR_REQUEST_DECIDED", http.StatusConflict},
				{"unknown", "perm-nope", "ERR_UNKNOWN_REQUEST", http.StatusNotFound},
			} {
				status, body := x.action(c, csrf, "decide", `{"id":"`+k.id+`","behavior":"deny"}`, nil)
				if status != k.status || !strings.Contains(body, `"`+k.code+`"`) {
					t.Errorf("deciding a %s request: %d %s; want %d %s", k.name, status, body, k.status, k.code)
				}
			}
		})
	}
}

// TestDashboardActionTrailingBytes: every action refuses a body with
// anything after its JSON object (400) and does nothing; white space
// after it is no content.
func TestDashboardActionTrailingBytes(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	csrf := x.csrfOf(c)
	for _, a := range []struct{ path, body string }{
		{"answer", `{"turn_id":"turn-x","answer":"a"}`},
		{"cancel", `{"ticket":"ticket-x"}`},
		{"send", `{"to":"scout","brief":"b"}`},
		{"ack", `{"ticket":"ticket-x"}`},
		{"decide", `{"id":"perm-x","behavior":"allow"}`},
		{"merge", `{"member":"scout"}`},
		{"logout", `{}`},
	} {
		for _, tail := range []string{`{}`, `x`, ` 1`, `,`} {
			if status, body := x.action(c, csrf, a.path, a.body+tail, nil); status != http.StatusBadRequest {
				t.Errorf("%s with %q after its body: %d %s; want 400", a.path, tail, status, body)
			}
		}
	}
	if n := len(x.rv.Snapshot().Tickets); n != 0 {
		t.Errorf("%d tickets after the refused sends; want none", n)
	}
	if resp, _ := get(t, c, x.srv.URL+dashboard.Path); resp.StatusCode != http.StatusOK {
		t.Errorf("the page after the refused logouts: %s; want 200, still logged in", resp.Status)
	}
	if status, body := x.action(c, csrf, "send", `{"to":"scout","brief":"b"}`+"\n", nil); status != http.StatusOK {
		t.Errorf("a send with a newline after its body: %d %s; want 200", status, body)
	}
}

// TestDashboardLogout: logging out takes the same checks as every action
// (POST, the page's Origin, the CSRF token), ends the session on the
// daemon and clears the cookie: the old cookie opens nothing any more.
// The page has the control, by its accessible name.
func TestDashboardLogout(t *testing.T) {
	x := newDash(t)
	c := x.loggedIn(browser(t))
	csrf := x.csrfOf(c)
	if _, page := get(t, c, x.srv.URL+dashboard.Path); !strings.Contains(page, `<button type="button" id="logout" class="logout">Log out</button>`) {
		t.Error("the page has no Log out button")
	}
	u, _ := url.Parse(x.srv.URL)
	cookies := c.Jar.Cookies(u)
	for _, r := range []struct {
		name string
		csrf string
		edit func(*http.Request)
		want int
	}{
		{"GET", csrf, func(r *http.Request) { r.Method = http.MethodGet }, http.StatusMethodNotAllowed},
		{"no CSRF token", "", nil, http.StatusForbidden},
		{"foreign Origin", csrf, func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, http.StatusForbidden},
		{"form body", csrf, func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, http.StatusUnsupportedMediaType},
	} {
		if status, body := x.action(c, r.csrf, "logout", `{}`, r.edit); status != r.want {
			t.Errorf("logout, %s: %d %s; want %d", r.name, status, body, r.want)
		}
	}
	if resp, _ := get(t, c, x.srv.URL+dashboard.Path); resp.StatusCode != http.StatusOK {
		t.Fatalf("the page after refused logouts: %s; want 200", resp.Status)
	}
	if status, body := x.action(c, csrf, "logout", `{}`, nil); status != http.StatusOK {
		t.Fatalf("logout: %d %s; want 200", status, body)
	}
	if len(c.Jar.Cookies(u)) != 0 {
		t.Errorf("the cookie after logout: %v; want cleared", c.Jar.Cookies(u))
	}
	old := browser(t)
	old.Jar.SetCookies(u, cookies)
	if resp, _ := get(t, old, x.srv.URL+dashboard.Path); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the page with the cookie of the ended login: %s; want 401", resp.Status)
	}
	if status, _ := x.action(old, csrf, "send", `{"to":"scout","brief":"b"}`, nil); status != http.StatusUnauthorized {
		t.Errorf("a send with the cookie of the ended login: %d; want 401", status)
	}
}
