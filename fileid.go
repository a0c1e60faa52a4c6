package fleetstate

import (
	"errors"

	"github.com/fleetstate/fleetstate/internal/names"
)

// Limits on names. They are far above what agents use and low enough that a
// file ID always fits the path limits of common file systems.
const (
	MaxAgentNameLen   = names.MaxAgent   // bytes in an agent name
	MaxFileNameLen    = names.MaxFile    // bytes in a file name, separators included
	MaxSegmentLen     = names.MaxSegment // bytes in one segment of a file name
	MaxSessionNameLen = names.MaxSession // bytes in a session name
)

// FileID names a stored file: the session it was written in, the agent that
// wrote it and its file name. Its text form is
//
//	fsm::file::SESSION_ID::AGENT_NAME::FILE_NAME
//
// The session ID is a UUID in canonical lower-case form and the agent name
// neither contains "::" nor ends with ":", so the first two separators after
// the prefix are always the boundaries; everything after the second one is
// the file name, which may itself contain "::". That is why
// ParseFileID(id.String()) == id holds for every valid ID.
//
// FileID is a comparable value type. The zero value is not a valid ID:
// [FileID.IsValid] reports false and [FileID.String] returns "".
type FileID struct {
	session string
	agent   string
	name    string
}

// NewFileID returns the ID of file name written by agent in session, after
// checking each part.
func NewFileID(session, agent, name string) (FileID, error) {
	const op = "file ID"
	if !names.IsSessionID(session) {
		return FileID{}, newError(CodeCanOnlyRetrieveFiles, op, "session %s is not a lower-case UUID", quote(session))
	}
	if err := checkAgentName(op, agent); err != nil {
		return FileID{}, err
	}
	if err := checkFileName(op, name); err != nil {
		return FileID{}, err
	}
	return FileID{session: session, agent: agent, name: name}, nil
}

// ParseFileID parses the text form of a file ID. Anything that is not a
// valid ID, including an ID whose agent or file name breaks the naming
// rules, is an error with [CodeCanOnlyRetrieveFiles] that quotes the input.
func ParseFileID(s string) (FileID, error) {
	session, agent, name, err := names.FileID(s)
	if err != nil {
		return FileID{}, newError(CodeCanOnlyRetrieveFiles, "parse file ID", "%s: %v", quote(s), err)
	}
	return FileID{session: session, agent: agent, name: name}, nil
}

// IsValid reports whether id is a valid file ID, that is, not the zero value.
func (id FileID) IsValid() bool { return id.session != "" }

// Session returns the ID of the session the file belongs to.
func (id FileID) Session() string { return id.session }

// Agent returns the name of the agent that wrote the file.
func (id FileID) Agent() string { return id.agent }

// Name returns the file name, a slash-separated relative path.
func (id FileID) Name() string { return id.name }

// String returns the text form of id, or "" for the zero value.
func (id FileID) String() string {
	if !id.IsValid() {
		return ""
	}
	return names.FileIDPrefix + id.session + names.FileIDSep + id.agent + names.FileIDSep + id.name
}

// MarshalText implements [encoding.TextMarshaler]. The zero value marshals
// to empty text.
func (id FileID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements [encoding.TextUnmarshaler]. Empty text gives the
// zero value, so that a zero FileID survives a round trip.
func (id *FileID) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*id = FileID{}
		return nil
	}
	v, err := ParseFileID(string(text))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ValidateAgentName reports whether name is a valid agent name: one path
// segment of at most [MaxAgentNameLen] bytes of UTF-8, not "." or "..",
// without "/", "\", "::" or control characters, not ending with ":". The
// error has [CodeInvalidAgentName].
func ValidateAgentName(name string) error { return checkAgentName("validate agent name", name) }

// ValidateFileName reports whether name is a valid file name: one or more
// segments joined by "/", at most [MaxFileNameLen] bytes of UTF-8 in all.
// Each segment is at most [MaxSegmentLen] bytes, not empty, not "." or "..",
// without "\" or control characters, and does not start with the prefix the
// store reserves for its temporary files. "::" is allowed. The error has
// [CodeInvalidFileName].
func ValidateFileName(name string) error { return checkFileName("validate file name", name) }

func checkAgentName(op, name string) error {
	if err := names.Agent(name); err != nil {
		return &Error{Code: CodeInvalidAgentName, Op: op, Err: errors.New(quote(name) + ": " + err.Error())}
	}
	return nil
}

func checkFileName(op, name string) error {
	if err := names.File(name); err != nil {
		return &Error{Code: CodeInvalidFileName, Op: op, Err: errors.New(quote(name) + ": " + err.Error())}
	}
	return nil
}
