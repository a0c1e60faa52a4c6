package fleetstate

import (
	"errors"
	"fmt"
)

// Code is a machine-readable error code. Codes are part of the wire
// protocol shared with fleet-state-mgr and with MCP clients: a code is never
// renamed and never reused for another meaning.
type Code string

// Codes of the store, spelled as fleet-state-mgr spells them.
const (
	// CodeNoActiveSession: an operation needs a current session and none was
	// started.
	CodeNoActiveSession Code = "ERR_NO_ACTIVE_SESSION"
	// CodeFileExists: put without overwrite found the file already there.
	CodeFileExists Code = "ERR_FILE_EXISTS"
	// CodeCanOnlyRetrieveFiles: a string is not a file ID.
	CodeCanOnlyRetrieveFiles Code = "ERR_CAN_ONLY_RETRIEVE_FILES"
	// CodeSessionNotValid: the session named does not exist.
	CodeSessionNotValid Code = "ERR_SESSION_NOT_VALID"
	// CodeAgentNotValid: the agent has no directory in the session.
	CodeAgentNotValid Code = "ERR_AGENT_NOT_VALID"
	// CodeFileNotFound: the file does not exist in the agent's directory.
	CodeFileNotFound Code = "ERR_FILE_NOT_FOUND"
)

// Codes fleetstate adds for input that fleet-state-mgr would have accepted
// unchecked.
const (
	// CodeInvalidAgentName: an agent name breaks the rules of [ValidateAgentName].
	CodeInvalidAgentName Code = "ERR_INVALID_AGENT_NAME"
	// CodeInvalidFileName: a file name breaks the rules of [ValidateFileName].
	CodeInvalidFileName Code = "ERR_INVALID_FILE_NAME"
	// CodeInvalidSessionName: a session name is empty, too long, not UTF-8
	// or holds control characters.
	CodeInvalidSessionName Code = "ERR_INVALID_SESSION_NAME"
	// CodeContentTooLarge: content is over the store's size limit.
	CodeContentTooLarge Code = "ERR_CONTENT_TOO_LARGE"
	// CodePathConflict: a file name collides with an existing directory, or
	// one of its folders is an existing file.
	CodePathConflict Code = "ERR_PATH_CONFLICT"
	// CodePathEscape: a path inside the state directory is a symbolic link;
	// the store does not follow links.
	CodePathEscape Code = "ERR_PATH_ESCAPE"
	// CodeInternal: an unexpected failure, usually of the file system. It is
	// also what [CodeOf] reports for errors that carry no code.
	CodeInternal Code = "ERR_INTERNAL"
)

// Error is the error type of the package. It carries a [Code], the operation
// that failed and, where there is one, the underlying error.
//
// Error matches other errors by code: errors.Is(err, ErrFileExists) holds for
// every *Error with [CodeFileExists], however it is wrapped.
type Error struct {
	Code Code   // what went wrong, for programs
	Op   string // the operation, such as "put" or "parse file ID"
	Err  error  // the detail or the underlying error; may be nil
}

func (e *Error) Error() string {
	msg := "fleetstate: "
	if e.Op != "" {
		msg += e.Op + ": "
	}
	msg += codeText(e.Code)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for use with errors.Is. Each matches every [*Error] with its code.
var (
	ErrNoActiveSession      = &Error{Code: CodeNoActiveSession}
	ErrFileExists           = &Error{Code: CodeFileExists}
	ErrCanOnlyRetrieveFiles = &Error{Code: CodeCanOnlyRetrieveFiles}
	ErrSessionNotValid      = &Error{Code: CodeSessionNotValid}
	ErrAgentNotValid        = &Error{Code: CodeAgentNotValid}
	ErrFileNotFound         = &Error{Code: CodeFileNotFound}
	ErrInvalidAgentName     = &Error{Code: CodeInvalidAgentName}
	ErrInvalidFileName      = &Error{Code: CodeInvalidFileName}
	ErrInvalidSessionName   = &Error{Code: CodeInvalidSessionName}
	ErrContentTooLarge      = &Error{Code: CodeContentTooLarge}
	ErrPathConflict         = &Error{Code: CodePathConflict}
	ErrPathEscape           = &Error{Code: CodePathEscape}
	ErrInternal             = &Error{Code: CodeInternal}
)

// CodeOf returns the code of the first [*Error] in err's chain,
// [CodeInternal] for any other non-nil error, and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

func codeText(c Code) string {
	switch c {
	case CodeNoActiveSession:
		return "no active session"
	case CodeFileExists:
		return "file exists"
	case CodeCanOnlyRetrieveFiles:
		return "not a file ID"
	case CodeSessionNotValid:
		return "session does not exist"
	case CodeAgentNotValid:
		return "agent has no files in the session"
	case CodeFileNotFound:
		return "file not found"
	case CodeInvalidAgentName:
		return "invalid agent name"
	case CodeInvalidFileName:
		return "invalid file name"
	case CodeInvalidSessionName:
		return "invalid session name"
	case CodeContentTooLarge:
		return "content too large"
	case CodePathConflict:
		return "path conflicts with an existing file or directory"
	case CodePathEscape:
		return "symbolic link inside the state directory"
	case CodeInternal:
		return "internal error"
	case CodeUnknownMember:
		return "unknown member"
	case CodeUnknownTurn:
		return "unknown turn"
	case CodeUnknownTicket:
		return "unknown ticket"
	case CodeNoOpenTurn:
		return "no open turn"
	case CodeNoPendingQuestion:
		return "no question is waiting for an answer"
	case CodeQuestionPending:
		return "a question is already waiting for an answer"
	case CodeTicketOpen:
		return "the ticket's turn has not ended"
	case CodeNotPermitted:
		return "not permitted"
	case CodeInvalidArgument:
		return "invalid argument"
	case CodeClosed:
		return "rendezvous closed"
	case CodeMemberGone:
		return "member is gone"
	case CodeFleetOwned:
		return "the fleet is owned by another process"
	case CodeTurnCancelled:
		return "the lead cancelled the turn"
	case CodeSuperseded:
		return "a newer connection of the member took over"
	}
	return string(c)
}

// newError returns an *Error whose detail is formatted like fmt.Errorf.
func newError(code Code, op, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Err: fmt.Errorf(format, args...)}
}

// quote quotes s for an error message, clipped so that hostile input of any
// length gives a message of bounded size.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q…", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

// Codes of the rendezvous.
const (
	// CodeUnknownMember: the member named is not registered.
	CodeUnknownMember Code = "ERR_UNKNOWN_MEMBER"
	// CodeUnknownTurn: no open turn has the turn ID given.
	CodeUnknownTurn Code = "ERR_UNKNOWN_TURN"
	// CodeUnknownTicket: the caller holds no ticket with the ID given.
	CodeUnknownTicket Code = "ERR_UNKNOWN_TICKET"
	// CodeNoOpenTurn: the member has no turn open to reply to or ask in.
	CodeNoOpenTurn Code = "ERR_NO_OPEN_TURN"
	// CodeNoPendingQuestion: the turn has no question waiting for an
	// answer: it was answered already, its window passed, or the member
	// stopped waiting.
	CodeNoPendingQuestion Code = "ERR_NO_PENDING_QUESTION"
	// CodeQuestionPending: the member asked again while its earlier
	// question in the same turn still waits for an answer.
	CodeQuestionPending Code = "ERR_QUESTION_PENDING"
	// CodeTicketOpen: ack of a ticket whose turn has not ended yet.
	CodeTicketOpen Code = "ERR_TICKET_OPEN"
	// CodeNotPermitted: the caller may not do this, such as answering a
	// turn another lead opened.
	CodeNotPermitted Code = "ERR_NOT_PERMITTED"
	// CodeInvalidArgument: an argument is missing or malformed.
	CodeInvalidArgument Code = "ERR_INVALID_ARGUMENT"
	// CodeClosed: the rendezvous was closed.
	CodeClosed Code = "ERR_CLOSED"
	// CodeMemberGone: a member's pane or process no longer exists. A
	// [Member] port returns it (match with errors.Is(err, ErrMemberGone));
	// the member's open turn then fails with reason member_gone.
	CodeMemberGone Code = "ERR_MEMBER_GONE"
	// CodeFleetOwned: another process owns the state directory's fleet
	// (its rendezvous); reach the fleet through that process. The detail
	// is an [*OwnedError].
	CodeFleetOwned Code = "ERR_FLEET_OWNED"
	// CodeTurnCancelled: the lead cancelled the turn the member's call
	// is about.
	CodeTurnCancelled Code = "ERR_TURN_CANCELLED"
	// CodeSuperseded: a newer connection of the same member took over;
	// the older one may no longer take or answer turns.
	CodeSuperseded Code = "ERR_SUPERSEDED"
)

// Sentinels of the rendezvous codes.
var (
	ErrUnknownMember     = &Error{Code: CodeUnknownMember}
	ErrUnknownTurn       = &Error{Code: CodeUnknownTurn}
	ErrUnknownTicket     = &Error{Code: CodeUnknownTicket}
	ErrNoOpenTurn        = &Error{Code: CodeNoOpenTurn}
	ErrNoPendingQuestion = &Error{Code: CodeNoPendingQuestion}
	ErrQuestionPending   = &Error{Code: CodeQuestionPending}
	ErrTicketOpen        = &Error{Code: CodeTicketOpen}
	ErrNotPermitted      = &Error{Code: CodeNotPermitted}
	ErrInvalidArgument   = &Error{Code: CodeInvalidArgument}
	ErrClosed            = &Error{Code: CodeClosed}
	ErrMemberGone        = &Error{Code: CodeMemberGone}
	ErrFleetOwned        = &Error{Code: CodeFleetOwned}
	ErrTurnCancelled     = &Error{Code: CodeTurnCancelled}
	ErrSuperseded        = &Error{Code: CodeSuperseded}
)
