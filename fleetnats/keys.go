package fleetnats

import (
	"encoding/base64"
	"errors"
	"strings"
)

// Keys of a fleet's file index (the "NAME-files" bucket). A key is a NATS
// subject: tokens separated by '.', each of the characters
// [-_=a-zA-Z0-9/], never empty. Session IDs are lower-case UUIDs and go in
// as they are; an agent name and each segment of a file name may hold any
// UTF-8, so each is encoded with base64url without padding, whose alphabet
// has no '.':
//
//	run                                the run record (see runRecord)
//	SESSION                            marker: the session has files
//	SESSION.AGENT                      marker: the agent has files in it
//	SESSION.AGENT.SEG[.SEG...]         a folder marker or a file
//
// A folder and a file of one name share one key, so that a file "a" and a
// folder "a" (of a file "a/b") cannot both exist: each is made with
// Create, and of the two only one is made. Markers are never removed but
// by Clean, which purges the whole bucket.
const runKey = "run"

// keyEncoding is base64url without padding, and strict (no stray bits at
// the end); decodeToken also refuses what it skips, so that a key and a
// name map one to one.
var keyEncoding = base64.RawURLEncoding.Strict()

// encodeToken encodes an agent name or one segment of a file name as a
// key token.
func encodeToken(s string) string { return keyEncoding.EncodeToString([]byte(s)) }

// sessionKey, agentKey and fileKeys build the keys of a file's path.
func sessionKey(session string) string { return session }

func agentKey(session, agent string) string { return session + "." + encodeToken(agent) }

// fileKeys returns the keys of a file's path below its agent: those of the
// folders it is in, outermost first, and the file's own last.
func fileKeys(session, agent, name string) []string {
	segs := strings.Split(name, "/")
	keys := make([]string, len(segs))
	var b strings.Builder
	b.WriteString(agentKey(session, agent))
	for i, seg := range segs {
		b.WriteByte('.')
		b.WriteString(encodeToken(seg))
		keys[i] = b.String()
	}
	return keys
}

var errBadKey = errors.New("fleetnats: not a key of the file index")

// decodeFileKey returns the session, agent and file name of a key of the
// form SESSION.AGENT.SEG[.SEG...]. It checks the encoding only, not the
// names' rules: the caller builds a fleetstate.FileID, which does.
func decodeFileKey(key string) (session, agent, name string, err error) {
	tokens := strings.Split(key, ".")
	if len(tokens) < 3 || tokens[0] == "" {
		return "", "", "", errBadKey
	}
	a, err := decodeToken(tokens[1])
	if err != nil {
		return "", "", "", err
	}
	segs := make([]string, len(tokens)-2)
	for i, tok := range tokens[2:] {
		if segs[i], err = decodeToken(tok); err != nil {
			return "", "", "", err
		}
		if segs[i] == "" || strings.Contains(segs[i], "/") {
			return "", "", "", errBadKey
		}
	}
	return tokens[0], a, strings.Join(segs, "/"), nil
}

func decodeToken(tok string) (string, error) {
	if tok == "" {
		return "", errBadKey
	}
	b, err := keyEncoding.DecodeString(tok)
	// The decoder skips line breaks, even in strict mode: a token must be
	// exactly the encoding of what it decodes to.
	if err != nil || keyEncoding.EncodeToString(b) != tok {
		return "", errBadKey
	}
	return string(b), nil
}
