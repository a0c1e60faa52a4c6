package fleetstate

import (
	"errors"
	"fmt"
)

// Code is a machine-readable error code. Codes are part of the wire
// protocol shared with fleet-state-mgr and with MCP clients: a code is never
// renamed and never reused for another meaning.
type Code string

//go:generate go run ./internal/gencodes

// The codes, their sentinels (ErrFileExists, …) and their texts are
// generated into codes_gen.go from codes.txt, the one list of them.

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
	if t, ok := codeTexts[c]; ok {
		return t
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
