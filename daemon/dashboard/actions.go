package dashboard

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/door"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// The dashboard's actions are the library's calls, made on behalf of the
// person logged in, and recorded as events like any other call's:
//
//	POST /dashboard/answer {"turn_id", "answer"} → Rendezvous.Answer
//	POST /dashboard/decide {"id", "behavior", "message"} → Rendezvous.DecidePermission
//	POST /dashboard/cancel {"ticket"}            → Rendezvous.Cancel
//	POST /dashboard/send   {"to", "brief"}       → Rendezvous.SendDetached
//	POST /dashboard/ack    {"ticket"}            → Rendezvous.Ack
//	POST /dashboard/merge  {"member", "commit"}  → Work.Merge
//	POST /dashboard/budget {"member", "budget"}  → Rendezvous.SetBudget
//	POST /dashboard/logout {}                    → ends the login
//
// The operator's login acts on every lead's tickets, as the lead that
// sent each, and sends and merges as [mcpadapter.OperatorAgent], as the
// operator token does over MCP; a lead's login acts on its own tickets
// only, and sends and merges as that lead (the lead tools let any lead
// merge a member's branch), of the commit the page showed. A merge
// refused is answered as a result (merged false, with its reason), not
// as an error. Budgets are the operator's alone to set: a budget null
// removes one, and the answer is every budget with its spend. Ack (the page's Dismiss) takes
// away a finished ticket of the login's own sending only: the tickets a
// lead agent sent are its to collect, and the operator's sends would
// otherwise pile up, held until acked. Each request must come from the
// page itself: it needs the login cookie, an Origin that is the
// dashboard's own (or, without an Origin, Sec-Fetch-Site: same-origin), the
// login's CSRF token in the CSRFHeader header, compared in constant time,
// and a body of one JSON object and nothing after it, which a form of
// another site cannot send. A failure is answered as the permission
// endpoints answer it (see [PermissionHandler]): one status for each code.

// CSRFHeader is the header that carries a dashboard login's CSRF token
// on each action; the page has the token in its csrf-token meta element.
const CSRFHeader = "X-Fleetstate-CSRF"

// maxActionBody bounds the body of an action: text typed into a page,
// with room for JSON's escapes.
const maxActionBody = 1 << 20

// Errors an action answers with, besides the library's.
var (
	errNotSameOrigin = errors.New("forbidden: an action must come from the dashboard's own page (Origin)")
	errBadCSRF       = errors.New("forbidden: the action lacks this login's CSRF token (" + CSRFHeader + ")")
	errNotYours      = &fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: "dashboard", Err: errors.New("the ticket belongs to another lead")}
)

// actor is who an action is done for: the operator, or a lead by name.
type actor struct {
	lead string // the lead's agent name; empty for the operator
}

func (a actor) operator() bool { return a.lead == "" }

// sender is the lead name a's sends go under.
func (a actor) sender() string {
	if a.operator() {
		return mcpadapter.OperatorAgent
	}
	return a.lead
}

// serveAction checks that r is an action of the page of a live login and
// does it.
func (d *Dashboard) serveAction(w http.ResponseWriter, r *http.Request, name string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	s, ok := d.session(r)
	if !ok {
		http.Error(w, "unauthorized: log in with the URL that `fleetstate web` prints", http.StatusUnauthorized)
		return
	}
	if !sameOrigin(r) {
		http.Error(w, errNotSameOrigin.Error(), http.StatusForbidden)
		return
	}
	if got := r.Header.Get(CSRFHeader); got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
		http.Error(w, errBadCSRF.Error(), http.StatusForbidden)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "unsupported: an action's body is JSON (Content-Type: application/json)", http.StatusUnsupportedMediaType)
		return
	}
	var a actor
	if s.lead != "" {
		id, found := d.o.Tokens.Lookup(s.lead) // session checked it a moment ago
		if !found {
			http.Error(w, "unauthorized: the lead's token was revoked", http.StatusUnauthorized)
			return
		}
		a.lead = id.Agent
	}
	var args struct {
		TurnID string `json:"turn_id"`
		Answer string `json:"answer"`
		Ticket string `json:"ticket"`
		To     string `json:"to"`
		Brief  string `json:"brief"`
		// decide
		ID       string `json:"id"`
		Behavior string `json:"behavior"`
		Message  string `json:"message"`
		// merge, budget
		Member string             `json:"member"`
		Commit string             `json:"commit"`
		Budget *fleetstate.Budget `json:"budget"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(&args)
	if err == nil {
		err = door.EndOfJSON(dec)
	}
	if err != nil {
		if over := (*http.MaxBytesError)(nil); errors.As(err, &over) {
			http.Error(w, "too large: an action's body is at most 1 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "bad request: the body is not an action's JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	var o any
	switch name {
	case "logout":
		d.logout(w, r)
		o = map[string]bool{"ok": true}
	case "answer":
		o, err = d.answer(a, args.TurnID, args.Answer)
	case "cancel":
		o, err = d.cancel(a, args.Ticket)
	case "send":
		o, err = d.rv.SendDetached(a.sender(), args.To, args.Brief)
	case "ack":
		o, err = d.ack(a, args.Ticket)
	case "decide":
		o, err = d.decide(a, args.ID, args.Behavior, args.Message)
	case "merge":
		o, err = d.merge(r.Context(), a, args.Member, args.Commit)
	case "budget":
		o, err = d.setBudget(a, args.Member, args.Budget)
	}
	if err != nil {
		door.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(o)
}

// setBudget sets member's budget (the fleet's for ""), or removes it
// with b nil, for the operator's login alone, and returns the budgets.
func (d *Dashboard) setBudget(a actor, member string, b *fleetstate.Budget) (any, error) {
	if !a.operator() {
		return nil, &fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: "budget",
			Err: errors.New("only the operator sets budgets (fleetstate web --dir)")}
	}
	if err := d.rv.SetBudget(member, b); err != nil {
		return nil, err
	}
	return map[string]any{"budgets": d.rv.Budgets()}, nil
}

// decide allows or denies the permission request id: the operator's
// login, and a lead's where the fleet file lets leads decide
// (Options.LeadsDecide).
func (d *Dashboard) decide(a actor, id, behavior, message string) (any, error) {
	if !a.operator() && (d.o.LeadsDecide == nil || !d.o.LeadsDecide()) {
		return nil, &fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: "decide",
			Err: errors.New("the fleet file does not let leads decide permission requests")}
	}
	if err := d.rv.DecidePermission(a.sender(), id, fleetstate.Decision{Behavior: fleetstate.Behavior(behavior), Message: message}); err != nil {
		return nil, err
	}
	return map[string]bool{"ok": true}, nil
}

// answer answers the question of turn turnID as the lead that opened the
// turn. The dashboard does not wait for what follows, as a detached send
// does not: the lead collects the turn's outcome on its ticket.
func (d *Dashboard) answer(a actor, turnID, text string) (fleetstate.Outcome, error) {
	if turnID == "" {
		return fleetstate.Outcome{}, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "answer", Err: errors.New("no turn_id")}
	}
	lead, err := d.leadOf(a, func(t fleetstate.TicketInfo) bool { return t.TurnID == turnID })
	if err != nil {
		return fleetstate.Outcome{}, err
	}
	// For the lead, not as its call: what the lead's own calls were
	// returned stays held, and the turn's next outcome is news for it.
	return d.rv.AnswerFor(lead, turnID, text)
}

// cancel cancels ticket (or turn ID) for the lead that sent it, not as its
// call (CancelFor): the cancelled outcome is news that wakes the lead's
// waiting poll, and what the lead's own calls were returned stays held.
func (d *Dashboard) cancel(a actor, id string) (fleetstate.Outcome, error) {
	if id == "" {
		return fleetstate.Outcome{}, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "cancel", Err: errors.New("no ticket")}
	}
	lead, err := d.leadOf(a, func(t fleetstate.TicketInfo) bool { return t.Ticket == id || t.TurnID == id })
	if err != nil {
		return fleetstate.Outcome{}, err
	}
	return d.rv.CancelFor(lead, id)
}

// ack takes away a finished ticket that a itself sent.
func (d *Dashboard) ack(a actor, ticket string) (any, error) {
	if ticket == "" {
		return nil, &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "ack", Err: errors.New("no ticket")}
	}
	lead, err := d.leadOf(actor{lead: a.sender()}, func(t fleetstate.TicketInfo) bool { return t.Ticket == ticket })
	if err != nil {
		return nil, err
	}
	if err := d.rv.Ack(lead, ticket); err != nil {
		return nil, err
	}
	return map[string]string{"acked": ticket}, nil
}

// leadOf returns the lead of the ticket that match picks out of the
// fleet's tickets, if a may act on it: the operator may act on any, a
// lead on its own.
func (d *Dashboard) leadOf(a actor, match func(fleetstate.TicketInfo) bool) (string, error) {
	for _, t := range d.rv.Snapshot().Tickets {
		if !match(t) {
			continue
		}
		if !a.operator() && t.Lead != a.lead {
			return "", errNotYours
		}
		return t.Lead, nil
	}
	if a.operator() {
		return "", &fleetstate.Error{Code: fleetstate.CodeUnknownTicket, Op: "dashboard", Err: errors.New("no such ticket or turn")}
	}
	return a.lead, nil // the library answers for a ticket it does not know
}

// sameOrigin reports whether r comes from a page of the origin it was sent
// to: its Origin is that origin, or it has no Origin and the browser says
// Sec-Fetch-Site: same-origin. A request that is neither is refused, so a
// client that sends neither header (not a browser's fetch) cannot act.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return r.Header.Get("Sec-Fetch-Site") == "same-origin"
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return strings.EqualFold(origin, scheme+r.Host)
}
