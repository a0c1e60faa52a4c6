package mcpadapter

import (
	"context"
	"fmt"
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
// (see [HTTPOptions].Operator), and the lead the operator's dashboard
// login acts as: what a person sends from the CLI, watch or the dashboard
// is this lead's, and so are its tickets. A lead token issued to an agent
// of this name shares them.
const OperatorAgent = "operator"

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
