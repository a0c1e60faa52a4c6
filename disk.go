package fleetstate

import (
	"context"
	"errors"
	"strings"

	"github.com/fleetstate/fleetstate/internal/dirstore"
	"github.com/fleetstate/fleetstate/internal/names"
)

// dirBackend is the disk backend: the sessions and files of a state directory
// on an afero.Fs, kept by package dirstore. It maps dirstore's kinds of failure
// onto the library's codes and drops from listings the names no [FileID] can
// address. Calls do not wait on anyone, so the contexts are not consulted.
type dirBackend struct {
	d   *dirstore.Dir
	max int64 // the store's content limit: a larger file is never read
}

var _ OwnedBackend = (*dirBackend)(nil)

func (b *dirBackend) CurrentSession(context.Context) (Session, bool, error) {
	line, ok, err := b.d.ReadCurrent()
	if err != nil || !ok {
		return Session{}, false, b.err(err)
	}
	id, name, ok := strings.Cut(line, sessionSep)
	if !ok || !names.IsSessionID(id) {
		return Session{}, false, newError(CodeNoActiveSession, "", "%s does not hold ID:::NAME", dirstore.CurrentRunFile)
	}
	return Session{ID: id, Name: name}, true, nil
}

func (b *dirBackend) StartSession(_ context.Context, next Session) error {
	return b.err(b.d.StartSession(next.String()))
}

func (b *dirBackend) Put(_ context.Context, id FileID, content []byte, overwrite bool) error {
	err := b.d.Put(id.session, id.agent, id.name, content, overwrite, func() (string, error) {
		sess, _, err := b.CurrentSession(context.Background())
		return sess.ID, err
	})
	if kindOf(err) == dirstore.KindExists {
		return newError(CodeFileExists, "", "%s", quote(id.String()))
	}
	return b.err(err)
}

func (b *dirBackend) Get(_ context.Context, id FileID) ([]byte, error) {
	data, err := b.d.Get(id.session, id.agent, id.name, b.max)
	switch kindOf(err) {
	case dirstore.KindSessionMissing:
		return nil, newError(CodeSessionNotValid, "", "%s", quote(id.session))
	case dirstore.KindAgentMissing:
		return nil, newError(CodeAgentNotValid, "", "%s in session %s", quote(id.agent), id.session)
	case dirstore.KindFileMissing:
		return nil, newError(CodeFileNotFound, "", "%s", quote(id.String()))
	}
	return data, b.err(err)
}

func (b *dirBackend) List(_ context.Context, session, agent string) ([]FileInfo, bool, error) {
	files, exists, err := b.d.List(session, agent)
	if err != nil || !exists {
		return nil, exists, b.err(err)
	}
	out := make([]FileInfo, 0, len(files))
	for _, f := range files {
		if agent == "" && names.Agent(f.Agent) != nil || names.File(f.Name) != nil {
			continue
		}
		out = append(out, FileInfo{ID: FileID{session: session, agent: f.Agent, name: f.Name}, Size: f.Size, ModTime: f.ModTime})
	}
	return out, true, nil
}

func (b *dirBackend) Clean(context.Context) error { return b.err(b.d.Clean()) }

func (b *dirBackend) FleetOwner(context.Context) (Owner, bool, error) {
	o, ok, err := b.d.FleetOwner()
	return Owner(o), ok, b.err(err)
}

// kindOf returns the kind of a dirstore error; KindIO for any other.
func kindOf(err error) dirstore.Kind {
	var e *dirstore.Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return dirstore.KindIO
}

// err maps an error of package dirstore onto the library's codes, with no
// operation: the store's method sets it.
func (b *dirBackend) err(err error) error { return dirError(b.d, err) }

// dirError maps an error of d onto the library's codes, with no operation.
func dirError(d *dirstore.Dir, err error) error {
	var e *dirstore.Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	if e.Kind == dirstore.KindOwned {
		return &Error{Code: CodeFleetOwned, Err: &OwnedError{Dir: d.Path(), Owner: Owner(d.ReadOwner())}}
	}
	code, ok := map[dirstore.Kind]Code{
		dirstore.KindExists:         CodeFileExists,
		dirstore.KindSessionMissing: CodeSessionNotValid,
		dirstore.KindAgentMissing:   CodeAgentNotValid,
		dirstore.KindFileMissing:    CodeFileNotFound,
		dirstore.KindPathConflict:   CodePathConflict,
		dirstore.KindPathEscape:     CodePathEscape,
		dirstore.KindTooLarge:       CodeContentTooLarge,
		dirstore.KindNoSession:      CodeNoActiveSession,
	}[e.Kind]
	if !ok {
		code = CodeInternal
	}
	return &Error{Code: code, Err: e.Err}
}
