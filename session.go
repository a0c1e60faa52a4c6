package fleetstate

import (
	"errors"

	"github.com/fleetstate/fleetstate/internal/names"
	"github.com/google/uuid"
)

// sessionSep separates a session's ID from its name in current_run.txt
// and in the run log.
const sessionSep = ":::"

// Session is a run of work that groups the files agents write. Its ID is a
// random UUID; its name is the caller's label for it.
type Session struct {
	ID   string
	Name string
}

// String returns the session as current_run.txt holds it: "ID:::NAME".
func (s Session) String() string { return s.ID + sessionSep + s.Name }

// NewSession starts a session named name and makes it the current one. The
// session that was current is appended, one line "ID:::NAME", to
// previous_run_log.txt. The new session's directory appears only with its
// first file. Files of earlier sessions stay readable by ID.
func (s *Store) NewSession(name string) (Session, error) {
	const op = "new session"
	if err := names.Session(name); err != nil {
		return Session{}, &Error{Code: CodeInvalidSessionName, Op: op, Err: errors.New(quote(name) + ": " + err.Error())}
	}
	sess := Session{ID: uuid.NewString(), Name: name}
	ctx, cancel := s.bctx()
	defer cancel()
	if err := s.b.StartSession(ctx, sess); err != nil {
		return Session{}, withOp(op, err)
	}
	return sess, nil
}

// CurrentSession returns the current session, or [ErrNoActiveSession] if
// none was started since the directory was created or cleaned.
func (s *Store) CurrentSession() (Session, error) { return s.current("get session") }

func (s *Store) current(op string) (Session, error) {
	ctx, cancel := s.bctx()
	defer cancel()
	sess, ok, err := s.b.CurrentSession(ctx)
	if err != nil {
		return Session{}, withOp(op, err)
	}
	if !ok {
		return Session{}, &Error{Code: CodeNoActiveSession, Op: op}
	}
	return sess, nil
}

// Clean removes what the store and the rendezvous made in the state directory:
// every session folder, current_run.txt, previous_run_log.txt, leftover
// temporary files and the rendezvous state. Anything else in the directory
// stays, and so does what the store keeps as configuration under its private
// folder (the tokens, the locks). Afterwards there is no current session.
//
// While a [Rendezvous] owns the fleet, in this process or another, Clean
// fails with [ErrFleetOwned] and changes nothing: clean through
// [Rendezvous.Clean], which ends the fleet's turns too.
func (s *Store) Clean() error {
	const op = "clean sessions"
	if o, owned, err := s.fleetOwner(op); err != nil {
		return err
	} else if owned {
		return &Error{Code: CodeFleetOwned, Op: op, Err: &OwnedError{Dir: s.dir, Owner: o}}
	}
	return s.clean(op)
}

// clean cleans the sessions through the backend: Clean once it found the
// fleet unowned, or the fleet's owner (Rendezvous.Clean).
func (s *Store) clean(op string) error {
	ctx, cancel := s.bctx()
	defer cancel()
	return withOp(op, s.b.Clean(ctx))
}
