package mcpadapter

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
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

// Tokens is the store of bearer tokens of HTTP callers. Only the SHA-256 of
// each token is kept, in a file readable by its owner only; a token is
// shown once, when it is added. Lookups reread the file when it changed,
// so tokens added by another process (the token command) take effect
// without a restart. Tokens is safe for concurrent use.
type Tokens struct {
	fs   afero.Fs
	path string

	mu      sync.Mutex
	entries []tokenEntry // guarded by mu
	modTime time.Time    // guarded by mu; of the file when entries were read
	size    int64        // guarded by mu
}

type tokenEntry struct {
	Agent   string    `json:"agent"`
	Role    Role      `json:"role"`
	Hash    string    `json:"sha256"`
	Created time.Time `json:"created"`
}

// OpenTokens opens the token store of store's state directory.
func OpenTokens(store *fleetstate.Store) (*Tokens, error) {
	t := &Tokens{fs: store.Fs(), path: TokenPath(store)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// reload rereads the file if it changed. t.mu must be held.
func (t *Tokens) reload() error {
	fi, err := t.fs.Stat(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		t.entries, t.modTime, t.size = nil, time.Time{}, 0
		return nil
	}
	if err != nil {
		return fmt.Errorf("mcpadapter: token file: %w", pathless(err))
	}
	if fi.ModTime().Equal(t.modTime) && fi.Size() == t.size && t.entries != nil {
		return nil
	}
	data, err := afero.ReadFile(t.fs, t.path)
	if err != nil {
		return fmt.Errorf("mcpadapter: read token file: %w", pathless(err))
	}
	var entries []tokenEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return fmt.Errorf("mcpadapter: token file is not valid: %w", err)
	}
	if entries == nil {
		entries = []tokenEntry{}
	}
	t.entries, t.modTime, t.size = entries, fi.ModTime(), fi.Size()
	return nil
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
	if fi, err := t.fs.Stat(t.path); err == nil {
		t.modTime, t.size = fi.ModTime(), fi.Size()
	}
	return nil
}

// Lookup returns the identity a token stands for. The hash of the token
// is compared with every stored hash in constant time.
func (t *Tokens) Lookup(token string) (Identity, bool) {
	if !strings.HasPrefix(token, tokenPrefix) || len(token) > 128 {
		return Identity{}, false
	}
	h := []byte(hashToken(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return Identity{}, false
	}
	found := Identity{}
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(h, []byte(e.Hash)) == 1 {
			found = Identity{Agent: e.Agent, Role: e.Role}
		}
	}
	return found, !found.Anonymous()
}

// Len returns the number of tokens.
func (t *Tokens) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.reload()
	return len(t.entries)
}

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

// identities rereads the file if it changed and returns the identities
// that hold a token.
func (t *Tokens) identities() (map[Identity]bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return nil, err
	}
	out := make(map[Identity]bool, len(t.entries))
	for _, e := range t.entries {
		out[Identity{Agent: e.Agent, Role: e.Role}] = true
	}
	return out, nil
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
