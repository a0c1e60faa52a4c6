// Package auth says who may call the daemon: the agents' bearer tokens,
// kept hashed in a [TokenFile] (the state directory's file, or a key of
// the NATS configuration bucket); the operator's token; and the
// [Membership] that keeps a rendezvous's members in step with the tokens
// and tells the endpoints when an identity's tokens are revoked.
package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetstate/fleetstate/mcpadapter"

	"github.com/spf13/afero"

	"github.com/fleetstate/fleetstate"
)

// tokenFile is the token file's name in the store's private folder (see
// [TokenPath]).
const tokenFile = "tokens.json"

// TokenPath returns where the tokens of store live: in its private folder
// ([fleetstate.Store.PrivatePath]). Tokens are configuration: cleaning the
// sessions keeps them.
func TokenPath(store *fleetstate.Store) string { return store.PrivatePath(tokenFile) }

const tokenPrefix = "fst_"

// TokenRecheck bounds how old a [Tokens.Lookup]'s view of the token file
// may be: a lookup looks at the file (one stat; it is read only when its
// size or modification time changed) when the last look is older than
// this, so a token revoked by another process counts for every request
// that starts more than TokenRecheck after the file changed (a token not
// found is looked for again at once: one added counts at once). A
// request that starts in between is one more of those in progress at the
// revocation, which the [Membership] ends at its next look (see
// [DefaultTokenPoll]). Looking at the file on every request instead costs
// a stat (several microseconds, under a lock) per call; at most a hundred
// stats a second cost nothing however many calls come.
const TokenRecheck = 10 * time.Millisecond

// TokenFile is where a [Tokens] keeps its token file: the file's bytes,
// read whole and replaced whole. The file in a state directory's private
// folder ([OpenTokens]) is one; the configuration of a fleet kept in NATS
// JetStream (package daemon) is another. A Tokens calls its TokenFile's
// methods one at a time.
type TokenFile interface {
	// Load returns the file's bytes, nil when there is no file. A Tokens
	// calls it at every look at the file, as often as every
	// [TokenRecheck] while lookups come, so it answers from memory while
	// it knows the file unchanged (a stat, a watch). The caller does not
	// modify the bytes.
	Load() ([]byte, error)
	// Update replaces the file with what change returns for its current
	// bytes (nil when there is no file), or writes nothing if change
	// fails. It compares and swaps: if another writer replaced the file
	// after change read it, change runs again on the new bytes.
	Update(change func(old []byte) ([]byte, error)) error
}

// rereader is a [TokenFile] whose Load may answer from a copy that lags
// behind the file (the watch of a NATS key, say) and that can read the
// file itself. Reread returns the file's bytes as read now (or newer
// ones), and Loads after it return them too. A Tokens calls it instead of
// Load to look again when a token or a member was not found (see
// [Tokens.Lookup] and [Membership.Resync]), and Load if it fails.
type rereader interface {
	Reread() ([]byte, error)
}

// Tokens is the store of bearer tokens of HTTP callers. Only the SHA-256 of
// each token is kept, in a [TokenFile] (on the disk, readable by its owner
// only); a token is shown once, when it is added. Lookups reread the file
// when it changed, so tokens added or revoked by another process (the
// token command) take effect without a restart: a token added at once (a
// lookup that does not find a token looks again), a token revoked within
// [TokenRecheck]; the changes made through this Tokens take effect at
// once. Tokens is safe for concurrent use.
type Tokens struct {
	file TokenFile
	now  func() time.Time // the clock of the rechecks; a seam for tests

	mu      sync.Mutex   // serializes looks at the file and writes
	entries []tokenEntry // guarded by mu
	data    []byte       // guarded by mu; the file as entries were read from it
	version uint64       // guarded by mu; counts the sets of entries read or written

	// view is what lookups read without a lock: replaced whole, under mu,
	// never changed.
	view atomic.Pointer[tokenView]
	// rechecks counts the looks again begun (see recheck); changed under
	// mu.
	rechecks atomic.Uint64
}

// tokenView is an immutable snapshot of the token file for lookups.
type tokenView struct {
	byHash  map[[sha256.Size]byte]mcpadapter.Identity // entries that can authenticate, by the SHA-256 of the token
	n       int                                       // entries in the file
	failed  bool                                      // the file could not be read: every token is refused
	looked  time.Time                                 // when the file was last looked at
	version uint64
}

type tokenEntry struct {
	Agent   string          `json:"agent"`
	Role    mcpadapter.Role `json:"role"`
	Hash    string          `json:"sha256"`
	Created time.Time       `json:"created"`
}

// OpenTokens opens the token store of store's state directory: the file
// at [TokenPath].
func OpenTokens(store *fleetstate.Store) (*Tokens, error) {
	return NewTokens(&diskTokenFile{fs: store.Fs(), path: TokenPath(store), now: time.Now})
}

// NewTokens opens the token store kept in file, and reads it.
func NewTokens(file TokenFile) (*Tokens, error) {
	t := &Tokens{file: file, now: time.Now}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// reload looks at the file now and rereads it if it changed; a file that
// cannot be read leaves a view that refuses every token. t.mu must be
// held.
func (t *Tokens) reload() error { return t.reloadFrom(t.file.Load) }

// reloadFrom is reload with the file's bytes from load. t.mu must be
// held.
func (t *Tokens) reloadFrom(load func() ([]byte, error)) error {
	now := t.now()
	err := t.reread(load)
	if err != nil {
		// Len still counts the entries last read: a file that
		// cannot be read does not make a server without roles.
		t.view.Store(&tokenView{failed: true, n: len(t.entries), looked: now, version: t.version})
		return err
	}
	if v := t.view.Load(); v != nil && !v.failed && v.version == t.version {
		// Unchanged: the same view, looked at now.
		nv := *v
		nv.looked = now
		t.view.Store(&nv)
		return nil
	}
	t.publish(now)
	return nil
}

// reread rereads the file, its bytes from load, if it changed. t.mu
// must be held.
func (t *Tokens) reread(load func() ([]byte, error)) error {
	data, err := load()
	if err != nil {
		return err
	}
	if t.entries != nil && (data == nil) == (t.data == nil) && bytes.Equal(data, t.data) {
		return nil // the same entries: the same version
	}
	entries, err := parseTokenFile(data)
	if err != nil {
		return err
	}
	t.entries, t.data = entries, data
	t.version++
	return nil
}

// parseTokenFile returns the entries of a token file; no file (nil) has
// none.
func parseTokenFile(data []byte) ([]tokenEntry, error) {
	var entries []tokenEntry
	if data != nil {
		if err := json.Unmarshal(data, &entries); err != nil {
			return nil, fmt.Errorf("auth: token file is not valid: %w", err)
		}
	}
	if entries == nil {
		entries = []tokenEntry{}
	}
	return entries, nil
}

// fileTimeTick bounds the granularity of modification times: 2 s on FAT,
// a few milliseconds or less on the file systems of Linux, macOS and
// Windows. For that long after a change the token file is read again at
// every look.
const fileTimeTick = 2 * time.Second

// publish makes t.entries the view of lookups. t.mu must be held.
func (t *Tokens) publish(now time.Time) {
	v := &tokenView{byHash: make(map[[sha256.Size]byte]mcpadapter.Identity, len(t.entries)),
		n: len(t.entries), looked: now, version: t.version}
	for _, e := range t.entries {
		// Only a lower-case hex SHA-256, as hashToken writes it, and an
		// entry that names an agent can authenticate. Of two entries
		// with one hash (which only an edited file has), the later wins.
		var h [sha256.Size]byte
		if e.Agent == "" || len(e.Hash) != hex.EncodedLen(len(h)) || strings.ToLower(e.Hash) != e.Hash {
			continue
		}
		if _, err := hex.Decode(h[:], []byte(e.Hash)); err != nil {
			continue
		}
		v.byHash[h] = mcpadapter.Identity{Agent: e.Agent, Role: e.Role}
	}
	t.view.Store(v)
}

// current returns the view of lookups, after a look at the file if the
// last one is older than [TokenRecheck].
func (t *Tokens) current() *tokenView {
	now := t.now()
	if v := t.view.Load(); v != nil && fresh(v, now) {
		return v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Another lookup may have looked while this one waited.
	if v := t.view.Load(); v != nil && fresh(v, now) {
		return v
	}
	_ = t.reload() // a failure leaves a view that refuses every token
	return t.view.Load()
}

// recheck looks at the file again, unless another recheck began after
// seen, the count of rechecks (t.rechecks) when the caller missed what it
// looked for, and returns the view then. A token or a member not found
// may have been added by another process a moment ago, after the last
// look: a recheck finds it. Rechecks are serialized and coalesced, so
// that however many callers miss at once, one look serves them all,
// and a flood of unknown tokens or names makes at most one look at a
// time. A [TokenFile] that can reread itself (rereader) is asked to, in
// case its Load lags. t.mu must not be held.
func (t *Tokens) recheck(seen uint64) *tokenView {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recheckLocked(seen)
	return t.view.Load()
}

// recheckLocked is recheck with t.mu held.
func (t *Tokens) recheckLocked(seen uint64) {
	if t.rechecks.Load() != seen {
		return // one began since the caller missed, and has ended
	}
	t.rechecks.Add(1)
	load := t.file.Load
	if r, ok := t.file.(rereader); ok {
		load = func() ([]byte, error) {
			if data, err := r.Reread(); err == nil {
				return data, nil
			}
			return t.file.Load() // what the file's copy has, rather than nothing
		}
	}
	_ = t.reloadFrom(load) // a failure leaves a view that refuses every token
}

// fresh reports whether v was looked at less than TokenRecheck before now
// (or after it: a lookup that waited for another's look).
func fresh(v *tokenView, now time.Time) bool {
	return now.Sub(v.looked) < TokenRecheck
}

// Add creates a token for agent with role and returns it. The token is not
// stored, only its hash: it cannot be shown again. The operator's name
// gets none ([ErrReservedAgent]).
func (t *Tokens) Add(agent string, role mcpadapter.Role) (string, error) {
	if err := mcpadapter.CheckAgentName(agent); err != nil {
		return "", err
	}
	if _, err := mcpadapter.ParseRole(string(role)); err != nil {
		return "", err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.change(func(entries []tokenEntry) ([]tokenEntry, error) {
		for _, e := range entries {
			if e.Agent == agent && e.Role != role {
				return nil, fmt.Errorf("auth: agent %s already has role %s", agent, e.Role)
			}
		}
		return append(append([]tokenEntry(nil), entries...),
			tokenEntry{Agent: agent, Role: role, Hash: hashToken(token), Created: time.Now().UTC()}), nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// Revoke removes every token of agent and reports how many there were.
func (t *Tokens) Revoke(agent string) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return 0, err
	}
	if !slices.ContainsFunc(t.entries, func(e tokenEntry) bool { return e.Agent == agent }) {
		return 0, nil
	}
	n := 0
	err := t.change(func(entries []tokenEntry) ([]tokenEntry, error) {
		kept := []tokenEntry{}
		for _, e := range entries {
			if e.Agent != agent {
				kept = append(kept, e)
			}
		}
		if n = len(entries) - len(kept); n == 0 {
			return nil, errUnchanged
		}
		return kept, nil
	})
	if errors.Is(err, errUnchanged) {
		return 0, t.reload()
	}
	return n, err
}

// errUnchanged is the error of a change that leaves the file as it is.
var errUnchanged = errors.New("auth: token file unchanged")

// change replaces the entries of the file with what edit makes of them,
// and makes them the view of lookups. edit runs on the entries of the
// file as it is when it is replaced (again, if another writer replaced it
// meanwhile). t.mu must be held.
func (t *Tokens) change(edit func([]tokenEntry) ([]tokenEntry, error)) error {
	var entries []tokenEntry
	var data []byte
	err := t.file.Update(func(old []byte) ([]byte, error) {
		cur, err := parseTokenFile(old)
		if err != nil {
			return nil, err
		}
		if entries, err = edit(cur); err != nil {
			return nil, err
		}
		data, err = json.MarshalIndent(entries, "", "  ")
		return data, err
	})
	if err != nil {
		return err
	}
	t.entries, t.data = entries, data
	t.version++
	t.publish(t.now())
	return nil
}

// diskTokenFile is the token file of a state directory: a file of the
// store's file system, replaced by an atomic rename, owner-only. Its
// Update swaps against the writers of this process (a Tokens writes one
// at a time); between processes, the last rename wins.
type diskTokenFile struct {
	fs   afero.Fs
	path string
	now  func() time.Time // the clock that tells a settled modification time

	data    []byte    // the file as last read or written
	loaded  bool      // data is the file as it was at modTime
	modTime time.Time // of the file when data was read
	size    int64
	settled bool // data was read a tick of the file system's clock after modTime
}

// Load rereads the file if its size or modification time changed.
func (d *diskTokenFile) Load() ([]byte, error) {
	fi, err := d.fs.Stat(d.path)
	if errors.Is(err, fs.ErrNotExist) {
		d.data, d.loaded, d.modTime, d.size = nil, true, time.Time{}, 0
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auth: token file: %w", pathless(err))
	}
	if d.loaded && d.settled && fi.ModTime().Equal(d.modTime) && fi.Size() == d.size {
		return d.data, nil
	}
	// Read when the file changed, and also while its modification time is
	// recent: two versions of one size written within one tick of the file
	// system's clock have the same time, and only the bytes tell them
	// apart.
	settled := d.now().Sub(fi.ModTime()) > fileTimeTick
	data, err := afero.ReadFile(d.fs, d.path)
	if err != nil {
		return nil, fmt.Errorf("auth: read token file: %w", pathless(err))
	}
	d.data, d.loaded = data, true
	d.modTime, d.size, d.settled = fi.ModTime(), fi.Size(), settled
	return data, nil
}

// Update replaces the file atomically, owner-only.
func (d *diskTokenFile) Update(change func(old []byte) ([]byte, error)) error {
	old, err := afero.ReadFile(d.fs, d.path)
	if errors.Is(err, fs.ErrNotExist) {
		old, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("auth: read token file: %w", pathless(err))
	}
	data, err := change(old)
	if err != nil {
		return err
	}
	dir := filepath.Dir(d.path)
	if err := d.fs.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("auth: token folder: %w", pathless(err))
	}
	f, err := afero.TempFile(d.fs, dir, ".tokens-*")
	if err != nil {
		return fmt.Errorf("auth: write token file: %w", pathless(err))
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.fs.Chmod(f.Name(), 0o600)
	}
	if err == nil {
		err = d.fs.Rename(f.Name(), d.path)
	}
	if err != nil {
		_ = d.fs.Remove(f.Name())
		return fmt.Errorf("auth: write token file: %w", pathless(err))
	}
	d.data, d.loaded, d.settled = data, true, false
	if fi, err := d.fs.Stat(d.path); err == nil {
		d.modTime, d.size = fi.ModTime(), fi.Size()
	}
	return nil
}

// Lookup returns the identity a token stands for. Tokens longer than 128
// bytes or without the prefix are refused before hashing; the others are
// looked up by their SHA-256 in a map, in constant time however many
// tokens there are. What the map's timing could reveal is how the SHA-256
// of the caller's own input compares with stored hashes, which does not
// help find a token. A token revoked by another process is refused from
// [TokenRecheck] after the change of the file. A token not found is looked
// for again in the file, so that one another process added a moment ago
// is found; lookups that miss at once share one look (see recheck).
func (t *Tokens) Lookup(token string) (mcpadapter.Identity, bool) {
	if !strings.HasPrefix(token, tokenPrefix) || len(token) > 128 {
		return mcpadapter.Identity{}, false
	}
	seen := t.rechecks.Load()
	h := sha256.Sum256([]byte(token))
	v := t.current()
	id, ok := v.byHash[h]
	if !ok || v.failed {
		// Added by another process a moment ago, perhaps.
		v = t.recheck(seen)
		id, ok = v.byHash[h]
	}
	return id, ok && !v.failed && !id.Anonymous()
}

// Len returns the number of tokens.
func (t *Tokens) Len() int { return t.current().n }

// Agents returns the agents that hold a token of role, sorted.
func (t *Tokens) Agents(role mcpadapter.Role) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.reload()
	seen := map[string]bool{}
	var out []string
	for _, e := range t.entries {
		if e.Role == role && !seen[e.Agent] {
			seen[e.Agent] = true
			out = append(out, e.Agent)
		}
	}
	sort.Strings(out)
	return out
}

// identities looks at the file now, rereading it if it changed, and
// returns the identities that hold a token and the version of the
// entries they come from: the same version, the same identities.
func (t *Tokens) identities() (map[mcpadapter.Identity]bool, uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return nil, 0, err
	}
	return t.identitiesLocked(), t.version, nil
}

// recheckedIdentities is identities after recheck(seen) rather than a
// look. A recheck that began after seen has ended, so the identities of
// the last look are returned as they are.
func (t *Tokens) recheckedIdentities(seen uint64) (map[mcpadapter.Identity]bool, uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recheckLocked(seen)
	if v := t.view.Load(); v != nil && v.failed {
		return nil, 0, errors.New("auth: the token file cannot be read")
	}
	return t.identitiesLocked(), t.version, nil
}

// identitiesLocked returns the identities of t.entries. t.mu must be
// held.
func (t *Tokens) identitiesLocked() map[mcpadapter.Identity]bool {
	out := make(map[mcpadapter.Identity]bool, len(t.entries))
	for _, e := range t.entries {
		out[mcpadapter.Identity{Agent: e.Agent, Role: e.Role}] = true
	}
	return out
}

// pathless drops the path from a file-system error, so that messages never
// reveal where the state directory lives.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// operatorFile is where the daemon keeps its operator token, in the state
// directory's private folder.
const operatorFile = "operator.token"

const operatorPrefix = "fso_"

// NewOperatorToken makes a fresh operator token for store's daemon, readable
// by the state directory's owner only, and returns it. Whoever can read the
// state directory is the fleet's operator: it may watch the events and
// open the dashboard, never call a tool.
func NewOperatorToken(store *fleetstate.Store) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	token := operatorPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	path := store.PrivatePath(operatorFile)
	fsys := store.Fs()
	tmp := path + ".tmp"
	if err := afero.WriteFile(fsys, tmp, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("auth: write the operator token: %w", pathless(err))
	}
	if err := fsys.Chmod(tmp, 0o600); err != nil {
		return "", fmt.Errorf("auth: write the operator token: %w", pathless(err))
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return "", fmt.Errorf("auth: write the operator token: %w", pathless(err))
	}
	return token, nil
}

// OperatorToken reads the operator token of the daemon that serves store's
// fleet.
func OperatorToken(store *fleetstate.Store) (string, error) {
	data, err := afero.ReadFile(store.Fs(), store.PrivatePath(operatorFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", errors.New("auth: no operator token: no daemon has served this state directory (start fleetstate serve)")
	}
	if err != nil {
		return "", fmt.Errorf("auth: read the operator token: %w", pathless(err))
	}
	token := strings.TrimSpace(string(data))
	if !strings.HasPrefix(token, operatorPrefix) {
		return "", errors.New("auth: the operator token file is not valid")
	}
	return token, nil
}
