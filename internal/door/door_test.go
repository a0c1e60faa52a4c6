package door_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/door"
)

func TestBearer(t *testing.T) {
	for _, c := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer  abc ", "abc", true},
		{" BEARER abc", "abc", true},
		{"Basic abc", "", false},
		{"Bearer", "", false},
		{"Bearer   ", "", false},
		{"", "", false},
	} {
		if token, ok := door.Bearer(c.header); token != c.token || ok != c.ok {
			t.Errorf("Bearer(%q) = %q, %v; want %q, %v", c.header, token, ok, c.token, c.ok)
		}
	}
}

// TestRebound: a request to a loopback listener is refused when its Host
// or Origin names another host; one to another listener is not judged.
func TestRebound(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	lan := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8080}
	for _, c := range []struct {
		name   string
		local  net.Addr
		host   string
		origin string
		want   bool
	}{
		{"loopback host", loop, "127.0.0.1:8080", "", false},
		{"localhost with origin", loop, "localhost:8080", "http://localhost:8080", false},
		{"ipv6 loopback", loop, "[::1]:8080", "", false},
		{"rebound host", loop, "evil.example:8080", "", true},
		{"rebound origin", loop, "127.0.0.1:8080", "http://evil.example", true},
		{"bad origin", loop, "127.0.0.1:8080", "::", true},
		{"not loopback", lan, "fleet.lan:8080", "http://fleet.lan", false},
		{"no local address", nil, "evil.example", "", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		if c.local != nil {
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, c.local))
		}
		if got := door.Rebound(r); got != c.want {
			t.Errorf("%s: Rebound = %v; want %v", c.name, got, c.want)
		}
	}
}

// TestWriteError: the status follows the code, and an internal error's
// detail stays in the daemon.
func TestWriteError(t *testing.T) {
	for _, c := range []struct {
		err     error
		status  int
		message string
	}{
		{&fleetstate.Error{Code: fleetstate.CodeUnknownRequest, Op: "decide", Err: errors.New("no such request")}, 404, "no such request"},
		{&fleetstate.Error{Code: fleetstate.CodeRequestDecided, Op: "decide", Err: errors.New("decided")}, 409, "decided"},
		{&fleetstate.Error{Code: fleetstate.CodeDecisionUnconfirmed, Op: "decide", Err: errors.New("unconfirmed")}, 202, "unconfirmed"},
		{&fleetstate.Error{Code: fleetstate.CodeUnavailable, Op: "decide", Err: errors.New("down")}, 503, "down"},
		{errors.New("open /home/you/secret: denied"), 500, "internal error"},
	} {
		w := httptest.NewRecorder()
		door.WriteError(w, c.err)
		var body map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if w.Code != c.status || body["error"] != string(fleetstate.CodeOf(c.err)) || !strings.Contains(body["message"], c.message) ||
			w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("WriteError(%v): %d %v %v; want %d with %q", c.err, w.Code, body, w.Header(), c.status, c.message)
		}
		if c.status == 500 && strings.Contains(body["message"], "/home") {
			t.Errorf("an internal error's detail was sent: %q", body["message"])
		}
	}
}

func TestEndOfJSON(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{{`{"a":1}`, true}, {"{\"a\":1} \n", true}, {`{"a":1}{}`, false}, {`{"a":1} x`, false}} {
		dec := json.NewDecoder(strings.NewReader(c.body))
		var v map[string]any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if err := door.EndOfJSON(dec); (err == nil) != c.ok {
			t.Errorf("EndOfJSON after %q = %v; want ok %v", c.body, err, c.ok)
		}
	}
}

func TestUnauthorized(t *testing.T) {
	w := httptest.NewRecorder()
	door.Unauthorized(w, "no token")
	if w.Code != 401 || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") || !strings.Contains(w.Body.String(), "no token") {
		t.Errorf("Unauthorized: %d %v %q", w.Code, w.Header(), w.Body.String())
	}
}
