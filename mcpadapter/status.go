package mcpadapter

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/fleetstate/fleetstate"
)

// StatusPath is where agents' hooks report their status over HTTP.
const StatusPath = "/status"

// StatusReport is the body of a status report: the agent (which must be
// the token's) and its status.
type StatusReport struct {
	Agent  string `json:"agent,omitempty"`
	Status string `json:"status"`
}

// statusHandler takes status reports of authenticated agents.
func statusHandler(onStatus func(Identity, fleetstate.Status) error) func(w http.ResponseWriter, r *http.Request, id Identity) {
	return func(w http.ResponseWriter, r *http.Request, id Identity) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		if id.Anonymous() {
			http.Error(w, "status reports need an agent's token", http.StatusUnauthorized)
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
