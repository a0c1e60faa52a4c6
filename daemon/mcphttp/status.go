package mcphttp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/fleetstate/fleetstate/internal/usage"
	"github.com/fleetstate/fleetstate/mcpadapter"

	"github.com/fleetstate/fleetstate"
)

// StatusPath is where agents' hooks report their status over HTTP (POST a
// [StatusReport]). A GET there answers who the token is,
// {"agent": NAME, "role": "lead"|"member"}: a stdio proxy checks with it that the
// agent it was told it serves is the token's.
const StatusPath = "/status"

// StatusReport is the body of a status report: the agent (which must be
// the token's), its status, and what its model calls used so far, as one
// source counts it; a report may carry usage alone.
type StatusReport struct {
	Agent  string       `json:"agent,omitempty"`
	Status string       `json:"status,omitempty"`
	Usage  *UsageReport `json:"usage,omitempty"`
}

// UsageReport is a running total of tokens (input_tokens, output_tokens,
// cache_read_tokens, cache_write_tokens) and its source, a transcript's
// path say (see [fleetstate.Rendezvous.ReportUsage]); with models, the
// same by model ("" for calls of a model not named), whose sum is the
// total.
type UsageReport struct {
	Source string `json:"source"`
	fleetstate.Usage
	Models usage.ByModel `json:"models,omitempty"`
}

// Reports returns u as the rendezvous takes it, or an error naming
// what is wrong with it.
func (u *UsageReport) Reports() ([]fleetstate.UsageReport, error) {
	if u.Models == nil {
		return []fleetstate.UsageReport{{Source: u.Source, Total: u.Usage}}, usage.Check(u.Source, u.Usage)
	}
	if len(u.Models) == 0 || len(u.Models) > usage.MaxModels {
		return nil, fmt.Errorf("models: from 1 to %d", usage.MaxModels)
	}
	var sum fleetstate.Usage
	reps := make([]fleetstate.UsageReport, 0, len(u.Models))
	for model, total := range u.Models {
		if err := usage.Check(u.Source, total); err != nil {
			return nil, err
		}
		sum = sum.Add(total)
		reps = append(reps, fleetstate.UsageReport{Source: u.Source, Model: model, Total: total})
	}
	if sum != u.Usage {
		return nil, fmt.Errorf("the models add up to %+v, not to the total %+v", sum, u.Usage)
	}
	return reps, nil
}

// maxStatusBody bounds a status report: a usage of 64 models, each named
// in up to 256 bytes, fits.
const maxStatusBody = 64 << 10

// statusHandler takes status reports of authenticated agents.
func statusHandler(onStatus func(mcpadapter.Identity, fleetstate.Status) error, onUsage func(mcpadapter.Identity, []fleetstate.UsageReport) error) func(w http.ResponseWriter, r *http.Request, id mcpadapter.Identity) {
	return func(w http.ResponseWriter, r *http.Request, id mcpadapter.Identity) {
		if r.Method != http.MethodPost && r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "use POST to report, GET to ask who the token is", http.StatusMethodNotAllowed)
			return
		}
		if id.Anonymous() {
			http.Error(w, "status reports need an agent's token", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"agent": id.Agent, "role": string(id.Role)})
			return
		}
		var rep StatusReport
		if err := json.NewDecoder(io.LimitReader(r.Body, maxStatusBody)).Decode(&rep); err != nil || rep.Status == "" && rep.Usage == nil {
			http.Error(w, "body: want {\"status\": \"idle|working|blocked\"}, with \"usage\" or without", http.StatusBadRequest)
			return
		}
		if rep.Agent != "" && rep.Agent != id.Agent {
			http.Error(w, "an agent reports only its own status", http.StatusForbidden)
			return
		}
		st, err := fleetstate.ParseStatus(rep.Status)
		if err != nil && rep.Status != "" {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var reps []fleetstate.UsageReport
		if u := rep.Usage; u != nil {
			if reps, err = u.Reports(); err != nil {
				http.Error(w, "usage: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		// Usage first: a stop's report of the turn's last model call
		// lands before the status that may end the turn. Not counted (the
		// journal could not write it, say), it does not hold the status
		// up: the next report's total counts what this one's did not.
		var usageErr error
		if u := rep.Usage; u != nil && onUsage != nil {
			usageErr = onUsage(id, reps)
		}
		if usageErr != nil && rep.Status == "" {
			http.Error(w, usageErr.Error(), http.StatusConflict)
			return
		}
		if onStatus != nil && rep.Status != "" {
			if err := onStatus(id, st); err != nil {
				http.Error(w, err.Error(), http.StatusConflict)
				return
			}
		}
		if usageErr != nil {
			http.Error(w, "status taken; usage not counted: "+usageErr.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}
