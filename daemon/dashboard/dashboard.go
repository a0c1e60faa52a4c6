// Package dashboard is the daemon's web dashboard: a person logs in
// with a one-time code (printed by fleetstate web) for a cookie, sees the
// fleet live from the event stream, and acts on it: answer a question,
// cancel or send a turn, dismiss an outcome, allow or deny a permission
// request, merge a member's work tree into the lead's checkout. Every
// action checks the cookie, the Origin and a CSRF token. The page and
// its assets are embedded.
package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/door"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// The dashboard is a web page of the fleet that the daemon serves on its
// own address, beside /mcp and /events. Nobody gets a page, an asset or an
// event without a login cookie, and the only way to a cookie is a
// one-time code that the operator (whoever reads the state directory) or
// a lead asks the daemon for, with its bearer token, as `fleetstate web`
// does:
//
//	POST /dashboard/code (Authorization: Bearer TOKEN) → {"code": …}
//	GET  /dashboard/login?code=CODE → Set-Cookie, 303 to /dashboard/
//
// A code is good once, for DefaultLoginCodeTTL. A session lives in memory
// only, for DefaultSessionTTL, or until its lead's token is
// revoked; a restart of the daemon ends every session. The page itself
// reads the fleet from /events (the browser sends the cookie), the
// transcripts of the turns from /dashboard/transcripts, and what a
// member's git work tree holds (its branch, commits ahead of and behind
// the lead's branch, the files changed with their line counts, what is
// uncommitted, the diff with ?diff=1) from
//
//	GET /dashboard/changes?member=NAME → Work.Changes, as fleet_changes
//
// which only reads; it loads nothing from elsewhere, which its
// Content-Security-Policy enforces. Its actions (answer, cancel, send,
// ack, decide, merge, logout) are POSTs that need the cookie, the page's
// own origin and the login's CSRF token: see actions.go.

// Path is where the daemon serves the dashboard: every path under
// it.
const Path = "/dashboard/"

// Bounds of the dashboard's login, each an option of [Options].
const (
	// DefaultLoginCodeTTL is how long a login code is good for: the
	// time to paste a printed URL into a browser, short enough that a
	// URL left in a terminal's scroll-back is soon worthless.
	DefaultLoginCodeTTL = 5 * time.Minute
	// DefaultSessionTTL is how long a login lasts: a working
	// day, so that an operator logs in once a day.
	DefaultSessionTTL = 12 * time.Hour
	// maxLoginCodes bounds the codes outstanding of one principal (the
	// operator, or one lead); a new one beyond it drops that principal's
	// oldest, so a token holder asking in a loop holds memory bounded and
	// never drops another's code. Leads are as many as the token file
	// has, which the operator alone writes.
	maxLoginCodes = 16
	// maxDashboardSessions bounds the sessions of one principal; a login
	// beyond it ends that principal's oldest.
	maxDashboardSessions = 64
	// transcriptWait bounds how long /dashboard/transcripts waits for the
	// dashboard's own reading of the events to reach the sequence number
	// the page asks for.
	transcriptWait = 2 * time.Second
)

// dashboardCSP lets the page load its own script, style and images and
// open its event stream, and nothing else: no inline script, no frame, no
// form, no other origin.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed assets
var dashboardFiles embed.FS

// Options configure [New]. The zero value is valid:
// nobody can ask for a code (no operator, no tokens) and the bounds are
// the defaults.
type Options struct {
	// Operator is the daemon's operator token (see [auth.NewOperatorToken]):
	// its bearer may ask for a login code. Empty means none.
	Operator string
	// Tokens lets a lead's bearer token ask for a login code; the
	// session it gets ends when that token is revoked. Members may not.
	Tokens *auth.Tokens
	// CodeTTL is how long a login code is good for. Zero means
	// DefaultLoginCodeTTL.
	CodeTTL time.Duration
	// SessionTTL is how long a login lasts. Zero means
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// Version is shown in the page's footer.
	Version string
	// LeadsDecide, if set and true, lets a lead's login decide the
	// members' permission requests, as the fleet file's approvals say;
	// the operator's login always may.
	LeadsDecide func() bool
	// Work reads and merges the members' work trees; nil means no member
	// has one, and the page shows no work trees.
	Work Work
}

// Dashboard serves the fleet's web page and its login. Use [New];
// it is safe for concurrent use. [Dashboard.Authorized] is the hook that
// lets its cookie into [EventsHandler] (EventsOptions.Authorize).
type Dashboard struct {
	o     Options
	rv    *fleetstate.Rendezvous
	now   func() time.Time // a seam for the tests of expiry
	tr    *transcripts
	files http.Handler
	pages *template.Template

	mu       sync.Mutex
	codes    []loginCode                  // guarded by mu; oldest first
	sessions map[[32]byte]*dashboardLogin // guarded by mu; by the SHA-256 of the cookie
	logins   uint64                       // guarded by mu; logins so far
}

// loginCode is a one-time code, its expiry, the token of the lead that
// asked for it and that lead's name (both empty for the operator), in
// memory only.
type loginCode struct {
	code, lead, principal string
	expires               time.Time
}

// dashboardLogin is a session: its place in the order of logins, when it
// ends, the lead token it came from,
// if a lead's (the operator's holds for the daemon's life), the lead's
// name (empty for the operator), and the CSRF token its page sends back
// with each action.
type dashboardLogin struct {
	n               uint64
	expires         time.Time
	lead, principal string
	csrf            string
}

// New returns the dashboard of rv. It reads rv's events from now
// on for the transcripts of the turns, until [Dashboard.Close] or the
// rendezvous closes.
func New(rv *fleetstate.Rendezvous, o *Options) *Dashboard {
	d := &Dashboard{rv: rv, now: time.Now, sessions: map[[32]byte]*dashboardLogin{}}
	if o != nil {
		d.o = *o
	}
	if d.o.CodeTTL <= 0 {
		d.o.CodeTTL = DefaultLoginCodeTTL
	}
	if d.o.SessionTTL <= 0 {
		d.o.SessionTTL = DefaultSessionTTL
	}
	static, err := fs.Sub(dashboardFiles, "assets/static")
	if err != nil {
		panic(err) // the embedded files are part of the build: a test covers them
	}
	d.pages = template.Must(template.New("").Funcs(template.FuncMap{
		"age": func(since, now time.Time) string { return now.Sub(since).Truncate(time.Second).String() },
		"clip": func(s string, n int) string {
			// Counted in place: a conversion to runes would copy all of
			// a long s.
			i := 0
			for j := range s {
				if i == n {
					return s[:j] + "…"
				}
				i++
			}
			return s
		},
	}).ParseFS(dashboardFiles, "assets/*.html"))
	d.files = http.StripPrefix(Path+"static/", http.FileServerFS(static))
	d.tr = watchTranscripts(rv)
	return d
}

// Close stops the dashboard's reading of the events and ends every
// session. It is idempotent.
func (d *Dashboard) Close() {
	d.tr.close()
	d.mu.Lock()
	clear(d.sessions)
	d.codes = nil
	d.mu.Unlock()
}

// ServeHTTP serves the dashboard's paths under [Path].
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if door.Rebound(r) {
		http.Error(w, "forbidden: the Host or Origin of this request is not local", http.StatusForbidden)
		return
	}
	switch p := r.URL.Path; {
	case p == Path+"code":
		d.serveCode(w, r)
	case p == Path+"login":
		d.serveLogin(w, r)
	case !d.Authorized(r):
		d.refuse(w, r)
	case p == Path:
		d.servePage(w, r)
	case p == Path+"transcripts":
		d.serveTranscripts(w, r)
	case p == Path+"changes":
		d.serveChanges(w, r)
	case p == Path+"answer", p == Path+"cancel", p == Path+"send", p == Path+"ack", p == Path+"decide",
		p == Path+"merge", p == Path+"budget", p == Path+"logout":
		d.serveAction(w, r, strings.TrimPrefix(p, Path))
	case strings.HasPrefix(p, Path+"static/") && r.Method == http.MethodGet:
		d.files.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// Authorized reports whether r carries the cookie of a live session.
func (d *Dashboard) Authorized(r *http.Request) bool {
	_, ok := d.session(r)
	return ok
}

// session returns a copy of the live session whose cookie r carries.
func (d *Dashboard) session(r *http.Request) (dashboardLogin, bool) {
	c, err := r.Cookie(cookieName(r))
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return dashboardLogin{}, false
	}
	// Sessions are looked up by the hash of the cookie, so that the
	// lookup's timing says nothing about the secret.
	key := sha256.Sum256([]byte(c.Value))
	d.mu.Lock()
	s, ok := d.sessions[key]
	if ok && !d.now().Before(s.expires) {
		delete(d.sessions, key)
		ok = false
	}
	var login dashboardLogin
	if ok {
		login = *s
	}
	d.mu.Unlock()
	if !ok {
		return dashboardLogin{}, false
	}
	if login.lead != "" {
		// A lead's login lasts as long as its token.
		if d.o.Tokens == nil {
			return dashboardLogin{}, false
		}
		id, found := d.o.Tokens.Lookup(login.lead)
		if !found || id.Role != mcpadapter.RoleLead {
			return dashboardLogin{}, false
		}
	}
	return login, true
}

// cookieName is the session cookie's name for the daemon r reached.
// Browsers send a cookie of 127.0.0.1 to every port of it, so the name
// carries the port: two daemons on one machine do not overwrite each
// other's logins.
func cookieName(r *http.Request) string {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		if _, port, err := net.SplitHostPort(local.String()); err == nil {
			return "fleetstate_" + port
		}
	}
	return "fleetstate_dashboard"
}

// serveCode makes a login code for the operator or a lead.
func (d *Dashboard) serveCode(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	lead, principal, ok := d.bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="fleetstate"`)
		http.Error(w, "unauthorized: a login code is for the operator token or a lead's token", http.StatusUnauthorized)
		return
	}
	code := randomToken()
	d.mu.Lock()
	now := d.now()
	d.pruneCodes(now)
	n := 0
	for _, c := range d.codes {
		if c.principal == principal {
			n++
		}
	}
	if n >= maxLoginCodes {
		i := slices.IndexFunc(d.codes, func(c loginCode) bool { return c.principal == principal })
		d.codes = slices.Delete(d.codes, i, i+1)
	}
	d.codes = append(d.codes, loginCode{code: code, lead: lead, principal: principal, expires: now.Add(d.o.CodeTTL)})
	d.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"code":         code,
		"login":        Path + "login?code=" + code,
		"expires_in_s": int(d.o.CodeTTL / time.Second),
	})
}

// bearer reports whether r carries the operator token or a lead's, and
// the lead's token and name if it is one.
func (d *Dashboard) bearer(r *http.Request) (lead, name string, ok bool) {
	token, found := door.Bearer(r.Header.Get("Authorization"))
	if !found {
		return "", "", false
	}
	if d.o.Operator != "" && subtle.ConstantTimeCompare([]byte(token), []byte(d.o.Operator)) == 1 {
		return "", "", true
	}
	if d.o.Tokens == nil {
		return "", "", false
	}
	id, found := d.o.Tokens.Lookup(token)
	if !found || id.Role != mcpadapter.RoleLead {
		return "", "", false
	}
	return token, id.Agent, true
}

// pruneCodes drops the expired codes. d.mu must be held.
func (d *Dashboard) pruneCodes(now time.Time) {
	live := d.codes[:0]
	for _, c := range d.codes {
		if now.Before(c.expires) {
			live = append(live, c)
		}
	}
	clear(d.codes[len(live):])
	d.codes = live
}

// serveLogin redeems a code, once, for a session cookie.
func (d *Dashboard) serveLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	given := r.URL.Query().Get("code")
	c, ok := d.redeem(given)
	if !ok {
		d.page(w, http.StatusUnauthorized, "login", map[string]any{"Refused": true})
		return
	}
	value, csrf := randomToken(), randomToken()
	d.mu.Lock()
	now := d.now()
	for k, s := range d.sessions {
		if !now.Before(s.expires) {
			delete(d.sessions, k)
		}
	}
	var oldest [32]byte
	n := 0
	for k, s := range d.sessions {
		if s.principal != c.principal {
			continue
		}
		if n == 0 || s.n < d.sessions[oldest].n {
			oldest = k
		}
		n++
	}
	if n >= maxDashboardSessions {
		delete(d.sessions, oldest)
	}
	expires := now.Add(d.o.SessionTTL)
	d.logins++
	d.sessions[sha256.Sum256([]byte(value))] = &dashboardLogin{n: d.logins, expires: expires, lead: c.lead, principal: c.principal, csrf: csrf}
	d.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName(r),
		Value:    value,
		Path:     "/",
		MaxAge:   int(d.o.SessionTTL / time.Second),
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, Path, http.StatusSeeOther)
}

// redeem takes code out of the outstanding codes if it is one of them and
// has not expired. Every outstanding code is compared, in constant time.
func (d *Dashboard) redeem(given string) (loginCode, bool) {
	if given == "" || len(given) > 128 {
		return loginCode{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pruneCodes(d.now())
	found := -1
	for i, c := range d.codes {
		if subtle.ConstantTimeCompare([]byte(c.code), []byte(given)) == 1 {
			found = i
		}
	}
	if found < 0 {
		return loginCode{}, false
	}
	c := d.codes[found]
	d.codes = append(d.codes[:found], d.codes[found+1:]...)
	return c, true
}

// logout ends the session whose cookie r carries, and clears the cookie.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName(r)); err == nil {
		key := sha256.Sum256([]byte(c.Value))
		d.mu.Lock()
		delete(d.sessions, key)
		d.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName(r), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// refuse answers a request without a live session: a page that says how
// to log in, and nothing of the fleet.
func (d *Dashboard) refuse(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.Error(w, "unauthorized: log in with the URL that `fleetstate web` prints", http.StatusUnauthorized)
		return
	}
	d.page(w, http.StatusUnauthorized, "login", map[string]any{"Refused": false})
}

// servePage serves the dashboard's page, with the fleet as it is now; its
// script keeps it current from the events.
func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	s, ok := d.session(r)
	if !ok {
		d.refuse(w, r)
		return
	}
	var a actor
	if s.lead != "" {
		id, _ := d.o.Tokens.Lookup(s.lead)
		a.lead = id.Agent
	}
	snap := d.rv.Snapshot()
	d.page(w, http.StatusOK, "index", map[string]any{"Snapshot": snap, "Version": d.o.Version, "Now": d.now(),
		"CSRF": s.csrf, "Lead": a.lead, "Sender": a.sender(), "Work": d.workMembers()})
}

// page renders the template name.html.
func (d *Dashboard) page(w http.ResponseWriter, status int, name string, data any) {
	var b strings.Builder
	if err := d.pages.ExecuteTemplate(&b, name+".html", data); err != nil {
		http.Error(w, "template: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// serveTranscripts serves the transcripts of the recent turns as JSON,
// once the dashboard has read the events up to ?after=SEQ (or
// transcriptWait has passed).
func (d *Dashboard) serveTranscripts(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	var after uint64
	if s := r.URL.Query().Get("after"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			http.Error(w, "after: not a sequence number", http.StatusBadRequest)
			return
		}
		after = n
	}
	view := d.tr.view(r.Context(), after, transcriptWait)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(view)
}

// randomToken returns 32 random bytes, URL-safe. crypto/rand never fails
// (Go 1.24 on): it would end the program first.
func randomToken() string {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	return base64.RawURLEncoding.EncodeToString(raw[:])
}
