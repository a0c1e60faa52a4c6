package mcpadapter

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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/spf13/afero"
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
// this, so a token revoked or added by another process counts for every
// request that starts more than TokenRecheck after the file changed. A
// request that starts in between is one more of those in progress at the
// revocation, which the [Membership] ends at its next look (see
// [DefaultTokenPoll]). Looking at the file on every request instead costs
// a stat (several microseconds, under a lock) per call; at most a hundred
// stats a second cost nothing however many calls come.
const TokenRecheck = 10 * time.Millisecond

// Tokens is the store of bearer tokens of HTTP callers. Only the SHA-256 of
// each token is kept, in a file readable by its owner only; a token is
// shown once, when it is added. Lookups reread the file when it changed,
// so tokens added or revoked by another process (the token command) take
// effect without a restart, within [TokenRecheck]; the changes made through
// this Tokens take effect at once. Tokens is safe for concurrent use.
type Tokens struct {
	fs   afero.Fs
	path string
	now  func() time.Time // the clock of the rechecks; a seam for tests

	mu      sync.Mutex   // serializes looks at the file and writes
	entries []tokenEntry // guarded by mu
	modTime time.Time    // guarded by mu; of the file when entries were read
	size    int64        // guarded by mu
	data    []byte       // guarded by mu; the file as entries were read from it
	settled bool         // guarded by mu; entries were read a tick of the file system's clock after modTime
	version uint64       // guarded by mu; counts the sets of entries read or written

	// view is what lookups read without a lock: replaced whole, under mu,
	// never changed.
	view atomic.Pointer[tokenView]
}

// tokenView is an immutable snapshot of the token file for lookups.
type tokenView struct {
	byHash  map[[sha256.Size]byte]Identity // entries that can authenticate, by the SHA-256 of the token
	n       int                            // entries in the file
	failed  bool                           // the file could not be read: every token is refused
	looked  time.Time                      // when the file was last looked at
	version uint64
}

type tokenEntry struct {
	Agent   string    `json:"agent"`
	Role    Role      `json:"role"`
	Hash    string    `json:"sha256"`
	Created time.Time `json:"created"`
}

// OpenTokens opens the token store of store's state directory.
func OpenTokens(store *fleetstate.Store) (*Tokens, error) {
	t := &Tokens{fs: store.Fs(), path: TokenPath(store), now: time.Now}
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
func (t *Tokens) reload() error {
	now := t.now()
	err := t.reread()
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

// reread rereads the file if its size or modification time changed.
// t.mu must be held.
func (t *Tokens) reread() error {
	fi, err := t.fs.Stat(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		if t.entries == nil || len(t.entries) > 0 || !t.modTime.IsZero() {
			t.entries, t.data, t.modTime, t.size = []tokenEntry{}, nil, time.Time{}, 0
			t.version++
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("mcpadapter: token file: %w", pathless(err))
	}
	if fi.ModTime().Equal(t.modTime) && fi.Size() == t.size && t.entries != nil && t.settled {
		return nil
	}
	// Read when the file changed, and also while its modification time is
	// recent: two versions of one size written within one tick of the file
	// system's clock have the same time, and only the bytes tell them
	// apart.
	settled := t.now().Sub(fi.ModTime()) > fileTimeTick
	data, err := afero.ReadFile(t.fs, t.path)
	if err != nil {
		return fmt.Errorf("mcpadapter: read token file: %w", pathless(err))
	}
	if t.entries != nil && bytes.Equal(data, t.data) {
		// The same entries: the same version.
		t.modTime, t.size, t.settled = fi.ModTime(), fi.Size(), settled
		return nil
	}
	var entries []tokenEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return fmt.Errorf("mcpadapter: token file is not valid: %w", err)
	}
	if entries == nil {
		entries = []tokenEntry{}
	}
	t.entries, t.data = entries, data
	t.modTime, t.size, t.settled = fi.ModTime(), fi.Size(), settled
	t.version++
	return nil
}

// fileTimeTick bounds the granularity of modification times: 2 s on FAT,
// a few milliseconds or less on the file systems of Linux, macOS and
// Windows. For that long after a change the token file is read again at
// every look.
const fileTimeTick = 2 * time.Second

// publish makes t.entries the view of lookups. t.mu must be held.
func (t *Tokens) publish(now time.Time) {
	v := &tokenView{byHash: make(map[[sha256.Size]byte]Identity, len(t.entries)),
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
		v.byHash[h] = Identity{Agent: e.Agent, Role: e.Role}
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

// fresh reports whether v was looked at less than TokenRecheck before now
// (or after it: a lookup that waited for another's look).
func fresh(v *tokenView, now time.Time) bool {
	return now.Sub(v.looked) < TokenRecheck
}

// Add creates a token for agent with role and returns it. The token is not
// stored, only its hash: it cannot be shown again.
func (t *Tokens) Add(agent string, role Role) (string, error) {
	if err := fleetstate.ValidateAgentName(agent); err != nil {
		return "", err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return "", err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return "", err
	}
	for _, e := range t.entries {
		if e.Agent == agent && e.Role != role {
			return "", fmt.Errorf("mcpadapter: agent %s already has role %s", agent, e.Role)
		}
	}
	entries := append(append([]tokenEntry(nil), t.entries...),
		tokenEntry{Agent: agent, Role: role, Hash: hashToken(token), Created: time.Now().UTC()})
	if err := t.write(entries); err != nil {
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
	var kept []tokenEntry
	for _, e := range t.entries {
		if e.Agent != agent {
			kept = append(kept, e)
		}
	}
	n := len(t.entries) - len(kept)
	if n == 0 {
		return 0, nil
	}
	if kept == nil {
		kept = []tokenEntry{}
	}
	return n, t.write(kept)
}

// write replaces the token file atomically, owner-only. t.mu must be held.
func (t *Tokens) write(entries []tokenEntry) error {
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(t.path)
	if err := t.fs.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mcpadapter: token folder: %w", pathless(err))
	}
	f, err := afero.TempFile(t.fs, dir, ".tokens-*")
	if err != nil {
		return fmt.Errorf("mcpadapter: write token file: %w", pathless(err))
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = t.fs.Chmod(f.Name(), 0o600)
	}
	if err == nil {
		err = t.fs.Rename(f.Name(), t.path)
	}
	if err != nil {
		_ = t.fs.Remove(f.Name())
		return fmt.Errorf("mcpadapter: write token file: %w", pathless(err))
	}
	t.entries = entries
	t.version++
	t.data, t.settled = data, false
	if fi, err := t.fs.Stat(t.path); err == nil {
		t.modTime, t.size = fi.ModTime(), fi.Size()
	}
	t.publish(t.now())
	return nil
}

// Lookup returns the identity a token stands for. Tokens longer than 128
// bytes or without the prefix are refused before hashing; the others are
// looked up by their SHA-256 in a map, in constant time however many
// tokens there are. What the map's timing could reveal is how the SHA-256
// of the caller's own input compares with stored hashes, which does not
// help find a token. A token revoked by another process is refused from
// [TokenRecheck] after the change of the file.
func (t *Tokens) Lookup(token string) (Identity, bool) {
	if !strings.HasPrefix(token, tokenPrefix) || len(token) > 128 {
		return Identity{}, false
	}
	v := t.current()
	if v.failed {
		return Identity{}, false
	}
	id, ok := v.byHash[sha256.Sum256([]byte(token))]
	return id, ok && !id.Anonymous()
}

// Len returns the number of tokens.
func (t *Tokens) Len() int { return t.current().n }

// Agents returns the agents that hold a token of role, sorted.
func (t *Tokens) Agents(role Role) []string {
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
func (t *Tokens) identities() (map[Identity]bool, uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return nil, 0, err
	}
	out := make(map[Identity]bool, len(t.entries))
	for _, e := range t.entries {
		out[Identity{Agent: e.Agent, Role: e.Role}] = true
	}
	return out, t.version, nil
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
