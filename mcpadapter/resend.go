package mcpadapter

import "encoding/json"

// SafeToResend reports whether a tools/call of tool with the JSON
// arguments args may be sent again after the daemon it went to was lost
// before it answered: whether sending it twice does what sending it once
// does. The proxy and a daemon forwarding to the fleet's owner both ask,
// so that a call lost with a daemon is sent on rather than failed.
//
// The read-only tools are safe. So is fleet_ask: a member asking again in
// the same turn finds the question it asked, and the lead's answer if one
// came meanwhile. So is fleet_next when it names the turn its caller took
// last (after_turn): a turn handed to the lost call is then handed again
// rather than ended.
func SafeToResend(tool string, args json.RawMessage) bool {
	switch tool {
	case "get_session", "get", "list", "fleet_poll", "fleet_members", "fleet_ask":
		return true
	case "fleet_next":
		var a struct {
			AfterTurn *string `json:"after_turn"`
		}
		return json.Unmarshal(args, &a) == nil && a.AfterTurn != nil
	}
	return false
}
