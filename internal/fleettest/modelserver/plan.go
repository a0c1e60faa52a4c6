package modelserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// conversation is what a request of either API says about its
// conversation, in the terms of the script.
type conversation struct {
	script    Script
	hasScript bool
	scriptErr error
	// done counts the actions answered after the script's message: the
	// calls of tools other than the tool search, and the assistant
	// messages of text alone.
	done int
	// searched reports whether the last call in the history is a tool
	// search: its answer must then call the tool, found or not, so that
	// a tool the agent cannot find does not loop on searches.
	searched bool
	// neverApprove reports a Codex request whose approval policy is
	// never: a command then runs without asking for escalation.
	neverApprove bool
	// tools holds the names of the tools the request offers.
	tools map[string]bool
	// key is a digest of the conversation, from which the answer's ids
	// derive: the same request sent again gets the same ids.
	key string
}

// offer records that the request r offers the tool name.
func (c *conversation) offer(r *Request, name string) {
	r.Tools = append(r.Tools, name)
	c.tools[name] = true
}

// user reads text, a user message of the request r: the last one read
// is r's UserText, and a script in one is the conversation's. It reports
// whether text holds a script.
func (c *conversation) user(r *Request, text string) bool {
	r.UserText = text
	s, ok, err := FindScript(text)
	if ok {
		c.script, c.hasScript, c.scriptErr = s, true, err
	}
	return ok
}

// action is the answer [Server.plan] chose for a request.
type action struct {
	// step is the index of the answered action among the script's
	// actions, -1 where the answer is no step of a script.
	step int
	kind StepKind
	// text is the answer of a StepSay; command, tool and args are those
	// of a StepBash or StepTool.
	text    string
	command string
	tool    string
	args    json.RawMessage
	usage   Usage
}

// Texts the server answers where no script step does.
const (
	// NoScriptText answers a request whose conversation holds no script,
	// and a side request (one without tools, such as a title).
	NoScriptText = "ok"
	// EndText ends a turn whose script ran out of steps without a say.
	EndText = "done"
)

// plan chooses the answer to a request from its conversation alone, so
// that a request sent again is answered the same.
func (s *Server) plan(c conversation) action {
	switch {
	case !c.hasScript:
		return action{step: -1, kind: StepSay, text: NoScriptText, usage: s.usage}
	case c.scriptErr != nil:
		return action{step: -1, kind: StepSay, text: c.scriptErr.Error(), usage: s.usage}
	}
	acts := c.script.Actions()
	u := c.script.usageBefore(c.done, s.usage)
	if c.done >= len(acts) {
		return action{step: -1, kind: StepSay, text: EndText, usage: u}
	}
	st := acts[c.done]
	return action{step: c.done, kind: st.Kind, text: st.Text, command: st.Command, tool: st.Tool, args: st.Args, usage: u}
}

// digest returns a short hex digest of the parts, for ids.
func digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// digestJSON is the digest of v in JSON: of the conversation a request
// carries, whichever API's shape it has.
func digestJSON(v any) string {
	b, _ := json.Marshal(v)
	return digest(b)
}
