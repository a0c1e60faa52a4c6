package mcphttp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/daemon/mcphttp"
	agentkit "github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// Fuzz targets for what a caller sends the daemon: bearer tokens, the
// token file, HTTP requests (the fast path's answers held to mcp-go's
// too) and hook status reports. Their seed corpora are committed under
// testdata/fuzz.

// FuzzTokenLookup: only the tokens handed out are accepted, each as its
// agent.
func FuzzTokenLookup(f *testing.F) {
	st, err := fleetstate.Open(afero.NewMemMapFs(), adaptertest.FuzzDir, nil)
	if err != nil {
		f.Fatal(err)
	}
	tokens, err := auth.OpenTokens(st)
	if err != nil {
		f.Fatal(err)
	}
	issued := map[string]mcpadapter.Identity{}
	for _, id := range []mcpadapter.Identity{adaptertest.Lead, adaptertest.Scout} {
		tok, err := tokens.Add(id.Agent, id.Role)
		if err != nil {
			f.Fatal(err)
		}
		issued[tok] = id
		f.Add(tok)
		f.Add(tok[:len(tok)-1])
		f.Add(strings.ToUpper(tok))
	}
	f.Add("fst_")
	f.Add("")
	f.Add("fst_" + strings.Repeat("A", 43))
	f.Add("Bearer fst_x")
	f.Fuzz(func(t *testing.T, token string) {
		id, ok := tokens.Lookup(token)
		want, issuedTok := issued[token]
		if ok != issuedTok || id != want {
			t.Fatalf("Lookup(%q) = %v, %v; want %v, %v", token, id, ok, want, issuedTok)
		}
	})
}

// FuzzTokenFile: whatever the token file holds, the token store fails
// closed: a caller with no agent name is never let in, and nothing
// panics.
func FuzzTokenFile(f *testing.F) {
	f.Add([]byte(`[{"agent":"lead","role":"lead","sha256":"00","created":"2026-01-01T00:00:00Z"}]`))
	f.Add([]byte(`[{"agent":"","role":"lead","sha256":"2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"}]`))
	f.Add([]byte(`{"agent":"lead"}`))
	f.Add([]byte(`[null, 1, "x", {"role":"admin"}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := afero.NewMemMapFs()
		st, err := fleetstate.Open(fsys, adaptertest.FuzzDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(fsys, auth.TokenPath(st), data, 0o600); err != nil {
			t.Fatal(err)
		}
		tokens, err := auth.OpenTokens(st)
		if err != nil {
			if strings.Contains(err.Error(), adaptertest.FuzzDir) {
				t.Fatalf("error %q names the state directory", err)
			}
			return
		}
		// "x" hashes to the hash in the second seed: a token whose entry
		// has no agent is refused.
		for _, tok := range []string{"fst_x", "x", "fst_" + strings.Repeat("A", 43)} {
			if id, ok := tokens.Lookup(tok); ok && id.Agent == "" {
				t.Fatalf("Lookup(%q) let in a caller with no agent: %v", tok, id)
			}
		}
		_ = tokens.Len()
		_ = tokens.Agents(mcpadapter.RoleLead)
	})
}

// FuzzHTTPRequest sends arbitrary requests to the HTTP handler: whatever
// comes in, the answer is an HTTP response, never a crash, and a refused
// caller learns nothing.
func FuzzHTTPRequest(f *testing.F) {
	fz := adaptertest.NewFuzzed(f)
	st := fz.Store
	tokens, err := auth.OpenTokens(st)
	if err != nil {
		f.Fatal(err)
	}
	leadTok, err := tokens.Add("lead", mcpadapter.RoleLead)
	if err != nil {
		f.Fatal(err)
	}
	h := mcphttp.New(fz.Adapter, fz.Adapter.NewServer("fuzz", "0"), mcphttp.Options{Tokens: tokens, MaxRequestBytes: 1 << 20})
	f.Cleanup(func() { h.Close() })
	f.Add(uint8(0), true, "/mcp", "application/json", "tools/list", []byte(listBody))
	f.Add(uint8(0), false, "/mcp", "application/json", "tools/list", []byte(listBody))
	f.Add(uint8(0), true, "/status", "application/json", "", []byte(`{"status":"idle"}`))
	f.Add(uint8(1), true, "/mcp", "text/plain", "", []byte(`not json`))
	f.Add(uint8(0), true, "/mcp", "application/json", "notifications/cancelled", []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`))
	f.Add(uint8(2), true, "/mcp", "", "", []byte{})
	f.Fuzz(func(t *testing.T, method uint8, auth bool, path, ctype, mcpMethod string, body []byte) {
		m := []string{http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodHead, http.MethodOptions}[int(method)%5]
		if _, err := url.ParseRequestURI(path); err != nil || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " ?#%") {
			path = "/mcp"
		}
		req := httptest.NewRequest(m, "http://127.0.0.1"+path, bytes.NewReader(body))
		if ctype != "" && !strings.ContainsAny(ctype, "\r\n") {
			req.Header.Set("Content-Type", ctype)
		}
		if mcpMethod != "" && !strings.ContainsAny(mcpMethod, "\r\n") {
			req.Header.Set("Mcp-Method", mcpMethod)
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth {
			req.Header.Set("Authorization", "Bearer "+leadTok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !auth && rec.Code != http.StatusUnauthorized {
			t.Fatalf("%s %s without a token: status %d; want 401", m, path, rec.Code)
		}
		if rec.Code >= 500 {
			t.Fatalf("%s %s: status %d: %s", m, path, rec.Code, rec.Body.Bytes())
		}
		fz.CheckConfined(t)
	})
}

// FuzzStatusReport posts arbitrary bodies to the hook status endpoint.
func FuzzStatusReport(f *testing.F) {
	st, err := fleetstate.Open(afero.NewMemMapFs(), adaptertest.FuzzDir, nil)
	if err != nil {
		f.Fatal(err)
	}
	tokens, err := auth.OpenTokens(st)
	if err != nil {
		f.Fatal(err)
	}
	tok, err := tokens.Add("scout", mcpadapter.RoleMember)
	if err != nil {
		f.Fatal(err)
	}
	var got []fleetstate.Status
	var used []fleetstate.Usage
	a := mcpadapter.New(st, nil, nil)
	h := mcphttp.New(a, a.NewServer("fuzz", "0"), mcphttp.Options{Tokens: tokens,
		OnStatus: func(id mcpadapter.Identity, s fleetstate.Status) error {
			if id != adaptertest.Scout {
				return errorf("status of %v", id)
			}
			got = append(got, s)
			return nil
		},
		OnUsage: func(id mcpadapter.Identity, reps []fleetstate.UsageReport) error {
			var sum fleetstate.Usage
			for _, r := range reps {
				u := r.Total
				if id != adaptertest.Scout || r.Source == "" || r.Source != reps[0].Source || u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 {
					return errorf("usage of %v: %+v", id, r)
				}
				sum = sum.Add(u)
			}
			if len(reps) == 0 {
				return errorf("usage of %v: no report", id)
			}
			used = append(used, sum)
			return nil
		}})
	f.Cleanup(func() { h.Close() })
	f.Add([]byte(`{"status":"working"}`))
	f.Add([]byte(`{"agent":"lead","status":"idle"}`))
	f.Add([]byte(`{"status":"UNKNOWN"}`))
	f.Add([]byte(`{"status":1}`))
	f.Add([]byte(`{"hook_event_name":"Stop"}`))
	f.Add([]byte(`{"status":"idle","usage":{"source":"t.jsonl","input_tokens":5,"output_tokens":2}}`))
	f.Add([]byte(`{"usage":{"source":"t.jsonl","input_tokens":5,"output_tokens":-2}}`))
	f.Add([]byte(`{"usage":{"source":"","input_tokens":5}}`))
	f.Add([]byte(`{"usage":{"source":"t.jsonl","input_tokens":5,"models":{"a":{"input_tokens":2},"b":{"input_tokens":3}}}}`))
	f.Add([]byte(`{"usage":{"source":"t.jsonl","input_tokens":5,"models":{"a":{"input_tokens":2}}}}`))
	f.Add([]byte(`{"usage":{"source":"/t.jsonl","output_tokens":1,"models":{"":{"output_tokens":1}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, used = got[:0], used[:0]
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+mcphttp.StatusPath, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusNoContent:
			if len(got) > 1 || len(used) > 1 || len(got)+len(used) == 0 {
				t.Fatalf("204 but %d status and %d usage reports", len(got), len(used))
			}
		case http.StatusBadRequest, http.StatusForbidden:
			if len(got)+len(used) != 0 {
				t.Fatalf("status %d but the report went through", rec.Code)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
		}
		var ev agentkit.HookEvent
		if json.Unmarshal(body, &ev) == nil {
			agentkit.StatusOfHook(ev)
		}
	})
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// FuzzHTTPFastPath sends the same request to a handler with the fast path
// and to one without, each on a store of its own that has seen the same
// requests, and requires the same answer: status, content type and body
// (session IDs and times aside). Whatever the fast path takes, it must
// answer as mcp-go does; whatever it does not, mcp-go must get unchanged.
func FuzzHTTPFastPath(f *testing.F) {
	var h [2]*mcphttp.Handler
	var a *mcpadapter.Adapter
	for i := range h {
		fz := adaptertest.NewFuzzed(f)
		h[i] = mcphttp.New(fz.Adapter, fz.Adapter.NewServer("fuzz", "0"), mcphttp.Options{Anonymous: true, MaxRequestBytes: 1 << 20, NoFastPath: i == 0})
		f.Cleanup(func() { h[i].Close() })
		a = fz.Adapter
	}
	call := func(id, name, args string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + modernMeta + `,"name":"` + name + `","arguments":` + args + `}}`)
	}
	for _, s := range []struct {
		name string
		body []byte
	}{
		{"put", call("1", "put", `{"agent_name":"a","file_name":"f","content":"x\n\"\u00e9\ud83d\ude00<&>"}`)},
		{"get", call(`"x"`, "get", `{"id":"fsm::file::s::a::f"}`)},
		{"list", call("2", "list", `{}`)},
		{"get_session", []byte(`{"params":{"name":"get_session",` + modernMeta + `},"id":3,"method":"tools/call","jsonrpc":"2.0"}`)},
		{"new_session", call("4", "new_session", `{"name":"n"}`)},
		{"fleet_send", call("5", "fleet_send", `{"to":"scout","content":"x"}`)},
		{"get", []byte(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}},"arguments":{"id":1},"name":"get"}}`)},
	} {
		f.Add(s.body, "2026-07-28", "tools/call", s.name, "application/json")
	}
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`), "2026-07-28", "notifications/cancelled", "", "application/json")
	f.Fuzz(func(t *testing.T, body []byte, version, method, name, ctype string) {
		var got [2]string
		before := a.DirectCalls()
		for i := range h {
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(body))
			for k, v := range map[string]string{"Mcp-Protocol-Version": version, "Mcp-Method": method, "Mcp-Name": name, "Content-Type": ctype} {
				if v != "" && !strings.ContainsAny(v, "\r\n") {
					req.Header.Set(k, v)
				}
			}
			rec := httptest.NewRecorder()
			h[i].ServeHTTP(rec, req)
			got[i] = fmt.Sprintf("%d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes())
			got[i] = adaptertest.RFC3339.ReplaceAllString(adaptertest.SessionUUID.ReplaceAllString(got[i], "SID"), "TIME")
		}
		if got[0] != got[1] {
			t.Errorf("fast path taken: %v\nmcp-go:    %s\nfast path: %s", a.DirectCalls() > before, got[0], got[1])
		}
	})
}
