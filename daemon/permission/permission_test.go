package permission_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/permission"
	"github.com/fleetstate/fleetstate/internal/fleettest"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// testOperator is the daemon's operator token in these tests.
const testOperator = "fso_test-operator-token"

type permHTTP struct {
	srv                      *httptest.Server
	rv                       *fleetstate.Rendezvous
	scoutTok, leadTok, opTok string
}

func newPermHTTP(t *testing.T, leadsDecide bool) *permHTTP {
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
	x := &permHTTP{rv: rv, opTok: testOperator}
	if x.leadTok, err = tokens.Add("lead", mcpadapter.RoleLead); err != nil {
		t.Fatal(err)
	}
	if x.scoutTok, err = tokens.Add("scout", mcpadapter.RoleMember); err != nil {
		t.Fatal(err)
	}
	x.srv = httptest.NewServer(permission.NewHandler(rv, permission.Options{Tokens: tokens, Operator: testOperator, LeadsDecide: leadsDecide}))
	t.Cleanup(func() {
		rv.Close()
		x.srv.Close()
	})
	return x
}

func (x *permHTTP) post(t *testing.T, path, token string, body any) *http.Response {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, x.srv.URL+path, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestPermissionHTTP: the hook's POST waits for the operator's decision
// and answers it; an undecided request answers 204; listing and deciding
// take the operator token, or a lead's where leads decide; errors carry
// their codes.
func TestPermissionHTTP(t *testing.T) {
	x := newPermHTTP(t, false)
	hookDone := make(chan *http.Response, 1)
	go func() {
		hookDone <- x.post(t, permission.Path, x.scoutTok, map[string]any{
			"tool_name": "Bash", "tool_input": map[string]any{"command": "git push"}, "cwd": "/src", "key": "s1/t1"})
	}()
	if !fleettest.Until(5*time.Second, time.Millisecond, func() bool { return len(x.rv.PermissionRequests()) == 1 }) {
		t.Fatal("the request never became pending")
	}
	p := x.rv.PermissionRequests()[0]
	if p.Member != "scout" || p.Key != "s1/t1" || p.Input != `{"command":"git push"}` {
		t.Fatalf("request = %+v", p)
	}

	// The lead may neither list nor decide here; nobody unauthenticated may.
	for _, tok := range []string{x.leadTok, x.scoutTok, ""} {
		if resp := x.post(t, permission.RequestsPath+"/"+p.ID, tok, map[string]any{"behavior": "allow"}); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("decision with token %q: status %d; want 401", tok, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, x.srv.URL+permission.RequestsPath, nil)
	req.Header.Set("Authorization", "Bearer "+x.opTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Permissions []fleetstate.PermissionRequest
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Permissions) != 1 || list.Permissions[0].ID != p.ID {
		t.Fatalf("GET %s = %+v, %v; want the pending request", permission.RequestsPath, list, err)
	}
	resp.Body.Close()
	wantStatus := func(resp *http.Response, status int, code string) {
		t.Helper()
		var body struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != status || body.Error != code {
			t.Errorf("status %d, error %q; want %d, %q", resp.StatusCode, body.Error, status, code)
		}
	}
	wantStatus(x.post(t, permission.RequestsPath+"/"+p.ID, x.opTok, map[string]any{"behavior": "perhaps"}), http.StatusBadRequest, "ERR_INVALID_ARGUMENT")
	wantStatus(x.post(t, permission.RequestsPath+"/perm-nope", x.opTok, map[string]any{"behavior": "allow"}), http.StatusNotFound, "ERR_UNKNOWN_REQUEST")
	if resp := x.post(t, permission.RequestsPath+"/"+p.ID, x.opTok, map[string]any{"behavior": "deny", "message": "not today"}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("operator's decision: status %d; want 204", resp.StatusCode)
	}
	wantStatus(x.post(t, permission.RequestsPath+"/"+p.ID, x.opTok, map[string]any{"behavior": "allow"}), http.StatusConflict, "ERR_REQUEST_DECIDED")
	hook := <-hookDone
	var got permission.HookDecision
	if err := json.NewDecoder(hook.Body).Decode(&got); err != nil || hook.StatusCode != http.StatusOK {
		t.Fatalf("hook's answer: status %d, %v", hook.StatusCode, err)
	}
	if got.Decision.Behavior != fleetstate.BehaviorDeny || got.Decision.Message != "not today" || got.Decision.By != "operator" {
		t.Fatalf("hook's decision = %+v; want deny by operator, not today", got.Decision)
	}

	// Undecided within its window: 204, never an allow.
	if resp := x.post(t, permission.Path, x.scoutTok, map[string]any{"tool_name": "Bash", "timeout_ms": 50}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("undecided request: status %d; want 204", resp.StatusCode)
	}
	// The hook's call needs an agent's token, and a tool.
	if resp := x.post(t, permission.Path, x.opTok, map[string]any{"tool_name": "Bash"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("request with the operator token: status %d; want 401", resp.StatusCode)
	}
	wantStatus(x.post(t, permission.Path, x.scoutTok, map[string]any{"tool_input": map[string]any{}}), http.StatusBadRequest, "ERR_INVALID_ARGUMENT")
}

// TestPermissionHTTPLeadDecides: where the fleet file lets leads decide,
// a lead's token decides as the lead.
func TestPermissionHTTPLeadDecides(t *testing.T) {
	x := newPermHTTP(t, true)
	p, ch := adaptertest.RaisePermission(t, x.rv, "scout", fleetstate.PermissionRequest{Tool: "Bash"})
	if resp := x.post(t, permission.RequestsPath+"/"+p.ID, x.leadTok, map[string]any{"behavior": "allow"}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("lead's decision: status %d; want 204", resp.StatusCode)
	}
	if res := <-ch; res.Decision.Behavior != fleetstate.BehaviorAllow || res.Decision.By != "lead" {
		t.Fatalf("decision = %+v; want allow by lead", res.Decision)
	}
}

// TestPermissionHTTPAuthorize: a caller that PermissionOptions.Authorize
// admits (a dashboard's login) decides as whom it names, without a
// bearer token; one it refuses is refused.
func TestPermissionHTTPAuthorize(t *testing.T) {
	st, err := fleetstate.Open(afero.NewMemMapFs(), "/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := fleetstate.NewRendezvous(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(permission.NewHandler(rv, permission.Options{
		Authorize: func(r *http.Request) (string, bool) { return "operator", r.Header.Get("X-Test-Login") == "yes" },
	}))
	t.Cleanup(func() {
		rv.Close()
		srv.Close()
	})
	p, ch := adaptertest.RaisePermission(t, rv, "scout", fleetstate.PermissionRequest{Tool: "Bash"})
	decide := func(login string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+permission.RequestsPath+"/"+p.ID, strings.NewReader(`{"behavior":"allow"}`))
		req.Header.Set("X-Test-Login", login)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := decide("no"); got != http.StatusUnauthorized {
		t.Fatalf("refused login: status %d; want 401", got)
	}
	if got := decide("yes"); got != http.StatusNoContent {
		t.Fatalf("admitted login: status %d; want 204", got)
	}
	if res := <-ch; res.Decision.Behavior != fleetstate.BehaviorAllow || res.Decision.By != "operator" {
		t.Fatalf("decision = %+v; want allow by operator", res.Decision)
	}
}

// TestPermissionHTTPTrailingBytes: the hook's request and a decision
// refuse a body with anything after its JSON object (400), and decide
// nothing.
func TestPermissionHTTPTrailingBytes(t *testing.T) {
	x := newPermHTTP(t, false)
	p, ch := adaptertest.RaisePermission(t, x.rv, "scout", fleetstate.PermissionRequest{Tool: "Bash", Timeout: time.Minute})
	postRaw := func(path, token, body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, x.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct{ name, path, token, body string }{
		{"decision", permission.RequestsPath + "/" + p.ID, x.opTok, `{"behavior":"allow"} {"behavior":"deny"}`},
		{"decision, stray byte", permission.RequestsPath + "/" + p.ID, x.opTok, `{"behavior":"allow"}x`},
		{"hook request", permission.Path, x.scoutTok, `{"tool_name":"Bash","timeout_ms":50}]`},
	} {
		if status := postRaw(c.path, c.token, c.body); status != http.StatusBadRequest {
			t.Errorf("%s with bytes after its JSON: status %d; want 400", c.name, status)
		}
	}
	if n := len(x.rv.PermissionRequests()); n != 1 {
		t.Fatalf("pending after the refusals: %d; want the one request", n)
	}
	select {
	case res := <-ch:
		t.Fatalf("the request was decided by a refused body: %+v", res)
	default:
	}
}
