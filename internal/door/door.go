// Package door holds the checks and answers that every HTTP endpoint of
// the daemon shares: reading a bearer token, refusing a request that
// reached loopback under a rebound DNS name, answering an error with the
// status of its code, and refusing a body with bytes after its JSON.
package door

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/fleetstate/fleetstate"
)

// Bearer returns the token of an "Authorization: Bearer TOKEN" header.
// The scheme is matched without regard to case (RFC 9110, 11.1), and
// spaces around the token are tolerated.
func Bearer(auth string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(auth), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Rebound reports whether r reached a loopback listener under a name
// that is not loopback, in its Host or its Origin, as a page whose DNS
// name was rebound to 127.0.0.1 would make a browser do. Every endpoint
// refuses such a request with 403; a daemon that forwards requests to
// another must refuse it before forwarding, since the request it sends
// on carries the other's Host.
func Rebound(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopback(local.String()) {
		return false
	}
	if !isLoopback(r.Host) {
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !isLoopback(u.Host) {
			return true
		}
	}
	return false
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// status is the HTTP status that answers an error of code.
func status(code fleetstate.Code) int {
	switch code {
	case fleetstate.CodeInvalidArgument, fleetstate.CodeInvalidAgentName:
		return http.StatusBadRequest
	case fleetstate.CodeContentTooLarge:
		return http.StatusRequestEntityTooLarge
	case fleetstate.CodeNotPermitted:
		return http.StatusForbidden
	case fleetstate.CodeUnknownRequest, fleetstate.CodeUnknownMember, fleetstate.CodeUnknownTicket, fleetstate.CodeUnknownTurn:
		return http.StatusNotFound
	case fleetstate.CodeRequestDecided, fleetstate.CodeNoPendingQuestion, fleetstate.CodeTicketOpen, fleetstate.CodeBudgetExhausted:
		return http.StatusConflict
	case fleetstate.CodeDecisionUnconfirmed:
		return http.StatusAccepted
	case fleetstate.CodeClosed, fleetstate.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// WriteError answers err as {"error": CODE, "message": …} with the
// status of its code. An internal error's detail is not sent: it may
// name paths of the host.
func WriteError(w http.ResponseWriter, err error) {
	code := fleetstate.CodeOf(err)
	msg := err.Error()
	if code == fleetstate.CodeInternal {
		msg = "internal error"
	}
	WriteJSON(w, status(code), map[string]string{"error": string(code), "message": msg})
}

// WriteJSON answers v as JSON with status, not to be cached.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Unauthorized answers 401 with a bearer challenge and why.
func Unauthorized(w http.ResponseWriter, why string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="fleetstate"`)
	http.Error(w, "unauthorized: "+why, http.StatusUnauthorized)
}

// EndOfJSON reports an error unless dec's input ends after the value it
// decoded (white space aside).
func EndOfJSON(dec *json.Decoder) error {
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("more after the JSON value")
		}
		return err
	}
	return nil
}
