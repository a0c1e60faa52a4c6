package mcpadapter_test

import (
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// TestFleetApprove: a lead decides a member's request with fleet_approve
// and sees it in fleet_members, only where the fleet file lets leads
// decide; the operator always may.
func TestFleetApprove(t *testing.T) {
	e := newEnv(t, envOpts{adapter: &mcpadapter.Options{LeadsDecide: func() bool { return true }}})
	p, ch := adaptertest.RaisePermission(t, e.rv, "scout", fleetstate.PermissionRequest{Tool: "Bash", Input: `{"command":"rm -rf build"}`})
	members := e.Ok(lead, "fleet_members", nil)
	perms, _ := members["permissions"].([]any)
	if len(perms) != 1 || perms[0].(map[string]any)["id"] != p.ID || perms[0].(map[string]any)["tool"] != "Bash" {
		t.Fatalf("fleet_members' permissions = %v; want the pending request %s", members["permissions"], p.ID)
	}
	e.Fail(lead, "fleet_approve", map[string]any{"id": p.ID, "behavior": "maybe"}, fleetstate.CodeInvalidArgument)
	e.Fail(scout, "fleet_approve", map[string]any{"id": p.ID, "behavior": "allow"}, fleetstate.CodeNotPermitted)
	e.Fail(lead, "fleet_approve", map[string]any{"id": "perm-nope", "behavior": "allow"}, fleetstate.CodeUnknownRequest)
	e.Ok(lead, "fleet_approve", map[string]any{"id": p.ID, "behavior": "deny", "message": "not the shared build"})
	res := <-ch
	if !res.OK || res.Decision.Behavior != fleetstate.BehaviorDeny || res.Decision.Message != "not the shared build" || res.Decision.By != "lead" {
		t.Fatalf("decision = %+v, %v, %v; want deny by lead with the message", res.Decision, res.OK, res.Err)
	}
	e.Fail(lead, "fleet_approve", map[string]any{"id": p.ID, "behavior": "allow"}, fleetstate.CodeRequestDecided)

	// Without the fleet file's word, a lead neither decides nor sees.
	e2 := newEnv(t, envOpts{})
	p2, ch2 := adaptertest.RaisePermission(t, e2.rv, "scout", fleetstate.PermissionRequest{Tool: "Read"})
	e2.Fail(lead, "fleet_approve", map[string]any{"id": p2.ID, "behavior": "allow"}, fleetstate.CodeNotPermitted)
	if _, ok := e2.Ok(lead, "fleet_members", nil)["permissions"]; ok {
		t.Errorf("fleet_members lists permissions for a lead that may not decide")
	}
	// The operator, as its token calls the tools, always decides.
	operator := mcpadapter.Identity{Agent: mcpadapter.OperatorAgent, Role: mcpadapter.RoleLead}
	if perms, _ := e2.Ok(operator, "fleet_members", nil)["permissions"].([]any); len(perms) != 1 {
		t.Errorf("the operator's fleet_members lists %v; want the pending request", perms)
	}
	e2.Ok(operator, "fleet_approve", map[string]any{"id": p2.ID, "behavior": "allow"})
	if res := <-ch2; res.Decision.Behavior != fleetstate.BehaviorAllow || res.Decision.By != mcpadapter.OperatorAgent {
		t.Fatalf("decision = %+v; want allow by operator", res.Decision)
	}
}
