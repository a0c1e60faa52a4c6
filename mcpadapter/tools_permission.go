package mcpadapter

import (
	"context"
	"errors"

	"github.com/fleetstate/fleetstate"
)

// permissionSchema describes a pending permission request in a tool's
// result.
var permissionSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"id": str("the request's ID, for fleet_approve"), "member": str("the member that asks"),
		"tool": str("the tool it would use, such as Bash"), "input": str("the tool's input, as JSON text"),
		"cwd": str("the member's working folder"), "asked": str("when it asked"),
		"deadline": str("when the request ends undecided and the member's own prompt shows"),
	},
}

// pending returns rv's pending permission requests, never nil.
func pending(rv *fleetstate.Rendezvous) []fleetstate.PermissionRequest {
	reqs := rv.PermissionRequests()
	if reqs == nil {
		reqs = []fleetstate.PermissionRequest{}
	}
	return reqs
}

// approveTool is fleet_approve: the operator, or a lead where
// Options.LeadsDecide, decides a member's permission request.
func (a *Adapter) approveTool() tool {
	return tool{
		name: "fleet_approve",
		description: "Lead only: the operator, and other leads only where the fleet file lets leads decide (else ERR_NOT_PERMITTED). " +
			"Allow or deny a member's pending permission request (listed by fleet_members) by its id; a denial may say why in message. " +
			"ERR_UNKNOWN_REQUEST when no pending request has the id, ERR_REQUEST_DECIDED when someone decided first. " +
			"ERR_DECISION_UNCONFIRMED when the fleet's backend did not confirm the write: the decision may have taken effect, takes effect once a later write goes through, and any other decision is refused; do not decide again.",
		access: leadOnly,
		input: []field{
			{name: "id", kind: "string", desc: "the request's ID", required: true},
			{name: "behavior", kind: "string", desc: "allow or deny", required: true},
			{name: "message", kind: "string", desc: "why it is denied, for the member"},
		},
		output:      okOut(),
		annotations: ann("Decide a permission request", false, true, false),
		newArgs:     func() any { return new(approveArgs) },
		call: func(_ context.Context, id Identity, args any) (any, error) {
			if !a.mayDecide(id) {
				return nil, &fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: "fleet_approve",
					Err: errors.New("the fleet file does not let leads decide permission requests")}
			}
			p := args.(*approveArgs)
			d := fleetstate.Decision{Behavior: fleetstate.Behavior(*p.Behavior), Message: deref(p.Message)}
			return okResult(a.rv.DecidePermission(id.Agent, *p.ID, d))
		},
	}
}
