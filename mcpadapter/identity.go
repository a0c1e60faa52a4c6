package mcpadapter

import (
	"context"
	"errors"
	"fmt"

	"github.com/fleetstate/fleetstate"
)

// Role is what a caller may do in the fleet.
type Role string

// Roles. A caller with neither is anonymous: it may use the store tools,
// never the fleet tools.
const (
	RoleLead   Role = "lead"
	RoleMember Role = "member"
)

// OperatorAgent is the lead the daemon's operator token calls the tools as
// (see daemon/mcphttp's Options.Operator), and the lead the operator's dashboard
// login acts as: what a person sends from the CLI, watch or the dashboard
// is this lead's, and so are its tickets. No token is issued to an agent
// of this name (see [ErrReservedAgent]).
const OperatorAgent = "operator"

// ErrReservedAgent is the error of issuing a token to [OperatorAgent]:
// such a token would act as the person who runs the fleet, seeing and
// cancelling their tickets.
var ErrReservedAgent = errors.New(`mcpadapter: agent name "operator" is reserved for the operator's own token and dashboard login; choose another name`)

// CheckAgentName returns [ErrReservedAgent] for the name the operator acts
// as, and the error of [fleetstate.ValidateAgentName] for a name that is no
// agent's; nil for a name a token may be issued to.
func CheckAgentName(agent string) error {
	if agent == OperatorAgent {
		return ErrReservedAgent
	}
	return fleetstate.ValidateAgentName(agent)
}

// ParseRole parses "lead" or "member".
func ParseRole(s string) (Role, error) {
	switch Role(s) {
	case RoleLead, RoleMember:
		return Role(s), nil
	}
	return "", fmt.Errorf("mcpadapter: role %q is not lead or member", s)
}

// Identity is who is calling a tool. It comes from the transport (the
// process's configuration on stdio, the bearer token on HTTP), never from a
// tool argument. The zero Identity is an anonymous caller.
type Identity struct {
	Agent string
	Role  Role
}

// Anonymous reports whether id names no agent.
func (id Identity) Anonymous() bool { return id.Agent == "" }

type identityKey struct{}

// ContextWithIdentity returns a context that carries id to the tool
// handlers.
func ContextWithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFromContext returns the identity ctx carries, or the anonymous
// identity.
func IdentityFromContext(ctx context.Context) Identity {
	id, _ := ctx.Value(identityKey{}).(Identity)
	return id
}

// IdentityOf returns the identity ctx carries and whether it carries one
// at all: every HTTP request does, anonymous ones too; what a server does
// on its own (the end of a stdio session) does not.
func IdentityOf(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
