package mcphttp

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/fleetstate/fleetstate/mcpadapter"

	"github.com/fleetstate/fleetstate"
)

// StatusPath is where agents' hooks report their status over HTTP (POST a
// [StatusReport]). A GET there answers who the token is,
// {"agent": NAME, "role": "lead"|"member"}: a stdio proxy checks with it that the
// agent it was told it serves is the token's.
const StatusPath = "/status"

// StatusReport is the body of a status report: the agent (which must be
// the token's) and its status.
type StatusReport struct {
	Agent  string `json:"agent,omitempty"`
	Status string `json:"status"`
}

// statusHandler takes status reports of authenticated agents.
func statusHandler(onStatus func(mcpadapter.Identity, fleetstate.Status) error) func(w http.ResponseWriter, r *http.Request, id mcpadapter.Identity) {
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
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&rep); err != nil {
			http.Error(w, "body: want {\"status\": \"idle|working|blocked\"}", http.StatusBadRequest)
			return
		}
		if rep.Agent != "" && rep.Agent != id.Agent {
			http.Error(w, "an agent reports only its own status", http.StatusForbidden)
			return
		}
		st, err := fleetstate.ParseStatus(rep.Status)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if onStatus != nil {
			if err := onStatus(id, st); err != nil {
				http.Error(w, err.Error(), http.StatusConflict)
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}
}
