// Package names holds the rules for the names a fleet's state is kept
// under: agents, files, sessions and session IDs. Each check returns an
// error that says why in a few words, and leaves quoting the input and
// the error's code to the root package, which exports the rules as
// fleetstate.ValidateAgentName and fleetstate.ValidateFileName.
package names

import (
	"crypto/rand"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fleetstate/fleetstate/internal/dirstore"
	"github.com/google/uuid"
)

// Limits on names, in bytes; the root package exports them.
const (
	MaxAgent   = 128  // an agent name
	MaxFile    = 1024 // a file name, separators included
	MaxSegment = 255  // one segment of a file name
	MaxSession = 256  // a session name
)

// IsSessionID reports whether s is a UUID in the canonical form the store
// writes: 36 characters, lower-case hexadecimal and hyphens.
func IsSessionID(s string) bool {
	if len(s) != 36 {
		return false
	}
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}

// The text form of a file ID: FileIDPrefix, then the session ID, the
// agent name and the file name, joined by FileIDSep.
const (
	FileIDPrefix = "fsm::file::"
	FileIDSep    = "::"
)

// FileID splits the text form of a file ID into its parts and checks each:
// the first two separators after the prefix are the boundaries, since a
// session ID and an agent name hold none, and the file name may.
func FileID(s string) (session, agent, name string, err error) {
	rest, ok := strings.CutPrefix(s, FileIDPrefix)
	if !ok {
		return "", "", "", errors.New("missing prefix " + FileIDPrefix)
	}
	session, rest, ok = strings.Cut(rest, FileIDSep)
	if !ok {
		return "", "", "", errors.New("missing agent name")
	}
	agent, name, ok = strings.Cut(rest, FileIDSep)
	switch {
	case !ok:
		return "", "", "", errors.New("missing file name")
	case !IsSessionID(session):
		return "", "", "", errors.New("session is not a lower-case UUID")
	}
	if err := Agent(agent); err != nil {
		return "", "", "", errors.New("agent name: " + err.Error())
	}
	if err := File(name); err != nil {
		return "", "", "", errors.New("file name: " + err.Error())
	}
	return session, agent, name, nil
}

// Agent checks an agent name: one segment, without "::", not ending
// with ":".
func Agent(name string) error {
	if len(name) > MaxAgent {
		return errors.New("longer than the limit")
	}
	if strings.Contains(name, "::") {
		return errors.New(`contains "::"`)
	}
	// "a:" followed by the separator reads as agent "a" and a file name
	// starting with ":", so the round trip needs this rule too.
	if strings.HasSuffix(name, ":") {
		return errors.New(`ends with ":"`)
	}
	return Segment(name)
}

// File checks a file name: one or more segments joined by "/".
func File(name string) error {
	if name == "" {
		return errors.New("empty")
	}
	if len(name) > MaxFile {
		return errors.New("longer than the limit")
	}
	for seg := range strings.SplitSeq(name, "/") {
		if err := Segment(seg); err != nil {
			return err
		}
	}
	return nil
}

// Segment checks one path segment; its error says why in a few
// words and leaves quoting the input to the caller.
func Segment(seg string) error {
	switch {
	case seg == "":
		return errors.New("empty path segment")
	case seg == "." || seg == "..":
		return errors.New(`"." or ".." path segment`)
	case len(seg) > MaxSegment:
		return errors.New("path segment longer than the limit")
	case strings.HasPrefix(seg, dirstore.TempPrefix):
		// A temporary file never shadows a stored one.
		return errors.New("path segment uses the reserved prefix " + dirstore.TempPrefix)
	case !utf8.ValidString(seg):
		return errors.New("not valid UTF-8")
	}
	for _, r := range seg {
		switch {
		case r == '/' || r == '\\':
			return errors.New("contains a path separator")
		case unicode.IsControl(r):
			return errors.New("contains a control character")
		}
	}
	return nil
}

// Session checks a session's name, which is stored on one line
// of current_run.txt and previous_run_log.txt.
func Session(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case len(name) > MaxSession:
		return errors.New("longer than the limit")
	case !utf8.ValidString(name):
		return errors.New("not valid UTF-8")
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return errors.New("contains a control character")
		}
	}
	return nil
}

// NewID returns prefix and a random (version 4) UUID in its canonical
// form, as prefix+uuid.NewString() does, in one allocation instead of four.
func NewID(prefix string) string {
	var u uuid.UUID
	_, _ = rand.Read(u[:])  // never fails (crypto/rand, Go 1.24 on)
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant RFC 4122
	const hexDigits = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hexDigits[c>>4], hexDigits[c&0x0f]
		j += 2
	}
	var s strings.Builder
	s.Grow(len(prefix) + len(b))
	s.WriteString(prefix)
	s.Write(b[:])
	return s.String()
}
