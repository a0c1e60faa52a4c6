package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/fleetstate/fleetstate/tmux"
)

// Roster names the agents of a fleet and where each lives. The daemon reads
// it with serve --roster FILE.
type Roster struct {
	// TmuxSocket is the socket of the tmux server the panes run on.
	TmuxSocket string `json:"tmux_socket"`
	// Programs holds screen patterns per agent program, for agents whose
	// status no hook reports.
	Programs map[string]*tmux.Patterns `json:"programs"`
	Agents   []RosterAgent             `json:"agents"`
}

// RosterAgent is one agent of a roster.
type RosterAgent struct {
	Name string `json:"name"`
	Role string `json:"role"` // lead or member
	// Tmux is the agent's pane as a tmux target ("fleet:0.1", "%3"); empty
	// for a member that pulls its messages with fleet_next.
	Tmux string `json:"tmux,omitempty"`
	// Program selects the screen patterns of Roster.Programs.
	Program string `json:"program,omitempty"`
}

func loadRoster(path string) (*Roster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("roster: %w", err)
	}
	var r Roster
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("roster %s: %w", path, err)
	}
	return &r, nil
}

// apply registers the roster's agents with the rendezvous and returns the
// panes by agent name, for the hooks' status reports.
func (ro *Roster) apply(rv *fleetstate.Rendezvous) (map[string]*tmux.Pane, error) {
	panes := map[string]*tmux.Pane{}
	var srv *tmux.Server
	for _, a := range ro.Agents {
		if err := fleetstate.ValidateAgentName(a.Name); err != nil {
			return nil, fmt.Errorf("roster: %w", err)
		}
		role, err := mcpadapter.ParseRole(a.Role)
		if err != nil {
			return nil, fmt.Errorf("roster: agent %s: %w", a.Name, err)
		}
		var port fleetstate.Member
		if a.Tmux != "" {
			if ro.TmuxSocket == "" {
				return nil, fmt.Errorf("roster: agent %s has a tmux pane but the roster names no tmux_socket", a.Name)
			}
			if srv == nil {
				srv = tmux.NewServer(ro.TmuxSocket)
			}
			var pats *tmux.Patterns
			if a.Program != "" {
				if pats = ro.Programs[a.Program]; pats == nil {
					return nil, fmt.Errorf("roster: agent %s: no patterns for program %q", a.Name, a.Program)
				}
			}
			p, err := tmux.NewPane(srv, a.Tmux, &tmux.PaneOptions{Patterns: pats})
			if err != nil {
				return nil, fmt.Errorf("roster: agent %s: %w", a.Name, err)
			}
			panes[a.Name] = p
			port = p
		}
		switch {
		case role == mcpadapter.RoleMember:
			err = rv.AddMember(a.Name, port)
		case port != nil:
			err = rv.SetLeadPort(a.Name, port)
		}
		if err != nil {
			return nil, err
		}
	}
	return panes, nil
}

// reportTo returns the OnStatus hook of the HTTP handler: a report goes to
// the agent's pane and wakes the rendezvous.
func reportTo(rv *fleetstate.Rendezvous, panes map[string]*tmux.Pane) func(mcpadapter.Identity, fleetstate.Status) error {
	return func(id mcpadapter.Identity, st fleetstate.Status) error {
		if p := panes[id.Agent]; p != nil {
			p.Report(st)
			rv.Wake(id.Agent)
		}
		return nil
	}
}
