package auth_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/afero"
	"pgregory.net/rapid"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/daemon/auth"
	"github.com/fleetstate/fleetstate/internal/fleettest/adaptertest"
	"github.com/fleetstate/fleetstate/mcpadapter"
)

// The identities of the tests.
var (
	lead  = mcpadapter.Identity{Agent: "lead", Role: mcpadapter.RoleLead}
	scout = mcpadapter.Identity{Agent: "scout", Role: mcpadapter.RoleMember}
	miner = mcpadapter.Identity{Agent: "miner", Role: mcpadapter.RoleMember}
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// statCounter counts the stats of the token file.
type statCounter struct {
	afero.Fs
	stats atomic.Int64
}

func (f *statCounter) Stat(name string) (os.FileInfo, error) {
	f.stats.Add(1)
	return f.Fs.Stat(name)
}

// TestTokensRecheck: the daemon's lookups see what another process (the
// token command) adds and revokes from TokenRecheck after the change, and
// at once after the membership's look; in between they look at the file
// at most once, however many lookups come.
func TestTokensRecheck(t *testing.T) {
	fsys := &statCounter{Fs: afero.NewMemMapFs()}
	st, err := fleetstate.Open(fsys, "/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	daemon, err := auth.OpenTokens(st)
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	auth.SetTokensClock(daemon, clock.Now)
	cli, err := auth.OpenTokens(st)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(tok string) bool {
		t.Helper()
		_, ok := daemon.Lookup(tok)
		return ok
	}

	tok, err := cli.Add("scout", mcpadapter.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(auth.TokenRecheck)
	if !lookup(tok) {
		t.Fatal("a token added by another opener is refused TokenRecheck after")
	}

	// Many lookups within the bound: one look at the file at most.
	before := fsys.stats.Load()
	for range 1000 {
		if !lookup(tok) {
			t.Fatal("a valid token refused")
		}
	}
	clock.Advance(auth.TokenRecheck - 1)
	lookup(tok)
	if n := fsys.stats.Load() - before; n != 0 {
		t.Errorf("%d stats of the token file for 1,001 lookups within TokenRecheck; want 0", n)
	}
	clock.Advance(1)
	lookup(tok)
	if n := fsys.stats.Load() - before; n != 1 {
		t.Errorf("%d stats once TokenRecheck passed; want 1", n)
	}

	// Revoked by another opener: refused once TokenRecheck has passed.
	if _, err := cli.Revoke("scout"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(auth.TokenRecheck - 1)
	if !lookup(tok) {
		t.Log("refused before the bound: allowed, not required")
	}
	clock.Advance(1)
	if lookup(tok) {
		t.Fatal("a revoked token is accepted TokenRecheck after its revocation")
	}

	// The membership's look applies a revocation at once, before it tells
	// the handlers: a request that looks its token up again after the
	// revocation is refused without waiting for the bound.
	tok2, err := cli.Add("miner", mcpadapter.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	m, err := auth.WatchMembership(daemon, nil, &auth.MembershipOptions{Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !lookup(tok2) {
		t.Fatal("a token added before the membership's look is refused after it")
	}
	var told []mcpadapter.Identity
	m.OnRevoke(func(id mcpadapter.Identity) {
		if lookup(tok2) {
			t.Errorf("the handlers are told of %v while its token is still accepted", id)
		}
		told = append(told, id)
	})
	if _, err := cli.Revoke("miner"); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if lookup(tok2) {
		t.Fatal("a revoked token is accepted after the membership's look")
	}
	if len(told) != 1 || told[0] != miner {
		t.Fatalf("revocations told %v; want miner", told)
	}
	// A look that finds nothing changed tells nothing again.
	if err := m.Sync(); err != nil || len(told) != 1 {
		t.Fatalf("a second look: %v, told %v; want miner once", err, told)
	}

	// Changes through the same Tokens count at once.
	tok3, err := daemon.Add("lead", mcpadapter.RoleLead)
	if err != nil {
		t.Fatal(err)
	}
	if !lookup(tok3) {
		t.Fatal("a token added through the daemon's Tokens is refused at once")
	}
	if _, err := daemon.Revoke("lead"); err != nil {
		t.Fatal(err)
	}
	if lookup(tok3) {
		t.Fatal("a token revoked through the daemon's Tokens is accepted")
	}

	// A file that cannot be read fails closed after the bound, and Len
	// still counts what was read (a server keeps its roles).
	tok4, err := cli.Add("boss", mcpadapter.RoleLead)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(auth.TokenRecheck)
	if !lookup(tok4) || daemon.Len() != 1 {
		t.Fatalf("boss's token: %v, Len %d; want accepted, 1", lookup(tok4), daemon.Len())
	}
	if err := afero.WriteFile(fsys, auth.TokenPath(st), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Advance(auth.TokenRecheck)
	if lookup(tok4) {
		t.Fatal("a token accepted from a file that does not parse")
	}
	if daemon.Len() != 1 {
		t.Fatalf("Len %d with an unreadable file; want the 1 last read", daemon.Len())
	}
}

// TestTokensReplacedSameSize: a token file replaced by another of the same
// size and modification time (two writes within one tick of the file
// system's clock) is read again on the operating system's file system.
func TestTokensReplacedSameSize(t *testing.T) {
	st, daemon := adaptertest.OpenStore(t)
	clock := newFakeClock()
	auth.SetTokensClock(daemon, clock.Now)
	cli, err := auth.OpenTokens(st)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cli.Add("aaaa", mcpadapter.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(auth.TokenRecheck)
	if _, ok := daemon.Lookup(tok); !ok {
		t.Fatal("the token is refused")
	}
	path := auth.TokenPath(st)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Replace aaaa's token by another of the same length: a file of the
	// same size, given the same modification time, as a coarse clock
	// would. (Revoking and adding through Tokens would change the size
	// with the length of the creation time's fraction of a second.)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	oldHash, newHash := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte("another token"))
	rewritten := bytes.Replace(data, []byte(hex.EncodeToString(oldHash[:])), []byte(hex.EncodeToString(newHash[:])), 1)
	if bytes.Equal(rewritten, data) {
		t.Fatalf("the token file does not hold the token's hash:\n%s", data)
	}
	if err := os.WriteFile(path, rewritten, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if fi2, err := os.Stat(path); err != nil || fi2.Size() != fi.Size() {
		t.Fatalf("the rewritten file: %v, %v; want the same size %d", fi2, err, fi.Size())
	}
	clock.Advance(auth.TokenRecheck)
	if _, ok := daemon.Lookup(tok); ok {
		t.Fatal("a revoked token is accepted after a rewrite of the same size and time")
	}
}

// TestTokensRapid: whatever another opener adds and revokes, and however
// the clock moves, the daemon's lookups answer as the token file stood at
// its last look, which is at most TokenRecheck old, and a token not found
// there is looked for in the file as it is now; the daemon's own changes
// count at once.
func TestTokensRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fsys := afero.NewMemMapFs()
		st, err := fleetstate.Open(fsys, "/state", nil)
		if err != nil {
			rt.Fatal(err)
		}
		daemon, err := auth.OpenTokens(st)
		if err != nil {
			rt.Fatal(err)
		}
		clock := newFakeClock()
		auth.SetTokensClock(daemon, clock.Now)
		cli, err := auth.OpenTokens(st)
		if err != nil {
			rt.Fatal(err)
		}
		agents := []string{"a1", "a2", "a3"}
		file := map[string]mcpadapter.Identity{} // the token file now
		seen := map[string]mcpadapter.Identity{} // as the daemon last looked
		last := clock.Now()                      // the daemon's last look
		var issued []string
		look := func() { seen, last = maps.Clone(file), clock.Now() }
		change := func(by *auth.Tokens, add bool, agent string) {
			if add {
				tok, err := by.Add(agent, mcpadapter.RoleMember)
				if err != nil {
					rt.Fatal(err)
				}
				issued = append(issued, tok)
				file[tok] = mcpadapter.Identity{Agent: agent, Role: mcpadapter.RoleMember}
			} else {
				if _, err := by.Revoke(agent); err != nil {
					rt.Fatal(err)
				}
				for tok, id := range file {
					if id.Agent == agent {
						delete(file, tok)
					}
				}
			}
			if by == daemon {
				look() // a change through the daemon's Tokens reads the file
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"cli": func(rt *rapid.T) {
				change(cli, rapid.Bool().Draw(rt, "add"), rapid.SampledFrom(agents).Draw(rt, "agent"))
			},
			"daemon": func(rt *rapid.T) {
				change(daemon, rapid.Bool().Draw(rt, "add"), rapid.SampledFrom(agents).Draw(rt, "agent"))
			},
			"advance": func(rt *rapid.T) {
				clock.Advance(time.Duration(rapid.Int64Range(0, int64(2*auth.TokenRecheck)).Draw(rt, "d")))
			},
			"lookup": func(rt *rapid.T) {
				if len(issued) == 0 {
					rt.Skip("no token yet")
				}
				tok := rapid.SampledFrom(issued).Draw(rt, "token")
				if clock.Now().Sub(last) >= auth.TokenRecheck {
					look()
				}
				if _, ok := seen[tok]; !ok {
					look() // added a moment ago, perhaps
				}
				want, wantOK := seen[tok]
				if id, ok := daemon.Lookup(tok); ok != wantOK || id != want {
					rt.Fatalf("Lookup = %v, %v; want %v, %v (as of the last look)", id, ok, want, wantOK)
				}
			},
		})
	})
}

// TestTokensRefuseOperatorName: no token is issued to the name the
// operator's token and dashboard login act as, whatever the role, and
// nothing is written; another name is issued one.
func TestTokensRefuseOperatorName(t *testing.T) {
	for _, c := range []struct {
		name  string
		agent string
		role  mcpadapter.Role
		want  error
	}{
		{"operator lead", mcpadapter.OperatorAgent, mcpadapter.RoleLead, mcpadapter.ErrReservedAgent},
		{"operator member", mcpadapter.OperatorAgent, mcpadapter.RoleMember, mcpadapter.ErrReservedAgent},
		{"another lead", "operator2", mcpadapter.RoleLead, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, tokens := adaptertest.OpenStore(t)
			_, err := tokens.Add(c.agent, c.role)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Add(%q, %s) = %v; want %v", c.agent, c.role, err, c.want)
			}
			if got := tokens.Agents(c.role); (c.want == nil) != slices.Contains(got, c.agent) {
				t.Errorf("agents of role %s after Add: %v", c.role, got)
			}
		})
	}
}

// --- tokens -----------------------------------------------------------

func TestTokens(t *testing.T) {
	st, tokens := adaptertest.OpenStore(t)
	clock := newFakeClock()
	auth.SetTokensClock(tokens, clock.Now)
	dir := st.Dir()
	if tokens.Len() != 0 {
		t.Errorf("Len of a new store %d; want 0", tokens.Len())
	}
	lt, err := tokens.Add("lead", mcpadapter.RoleLead)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := tokens.Add("scout", mcpadapter.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	mt2, err := tokens.Add("scout", mcpadapter.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if lt == mt || mt == mt2 || !strings.HasPrefix(lt, "fst_") || len(lt) < 40 {
		t.Errorf("tokens %q %q %q; want distinct fst_ tokens of 32 random bytes", lt, mt, mt2)
	}

	path := auth.TokenPath(st)
	if want := filepath.Join(dir, ".fleetstate", "tokens.json"); path != want {
		t.Errorf("TokenPath %s; want %s", path, want)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{lt, mt, mt2} {
		if bytes.Contains(data, []byte(tok)) || bytes.Contains(data, []byte(tok[4:])) {
			t.Errorf("the token file holds token %q in clear", tok)
		}
	}
	if !bytes.Contains(data, []byte(`"sha256"`)) {
		t.Errorf("token file %s; want hashes", data)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("token file mode %v; want 0600", perm)
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if perm := di.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("token folder mode %v; want owner-only", perm)
	}
	noTempFiles(t, filepath.Dir(path))

	for tok, want := range map[string]mcpadapter.Identity{lt: lead, mt: scout, mt2: scout} {
		if id, ok := tokens.Lookup(tok); !ok || id != want {
			t.Errorf("Lookup(%q) = %v, %v; want %v", tok, id, ok, want)
		}
	}
	for name, tok := range map[string]string{
		"empty":            "",
		"prefix only":      "fst_",
		"other prefix":     "xyz_" + lt[4:],
		"no prefix":        lt[4:],
		"upper prefix":     "FST_" + lt[4:],
		"truncated":        lt[:len(lt)-1],
		"extended":         lt + "A",
		"too long":         "fst_" + strings.Repeat("A", 200),
		"spaces":           " " + lt,
		"hash as token":    hashLike(data),
		"another's suffix": "fst_" + mt[4:len(mt)-1] + "x",
	} {
		if id, ok := tokens.Lookup(tok); ok {
			t.Errorf("Lookup(%s) = %v; want refused", name, id)
		}
	}

	// Tokens are shared with other processes through the file.
	other, err := auth.OpenTokens(st)
	if err != nil {
		t.Fatal(err)
	}
	auth.SetTokensClock(other, clock.Now)
	if id, ok := other.Lookup(mt); !ok || id != scout {
		t.Errorf("another opener's Lookup = %v, %v; want scout", id, ok)
	}
	late, err := other.Add("miner", mcpadapter.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(auth.TokenRecheck) // another opener's change counts from the next look
	if id, ok := tokens.Lookup(late); !ok || id != miner {
		t.Errorf("Lookup of a token another opener added = %v, %v; want miner", id, ok)
	}
	if got := tokens.Agents(mcpadapter.RoleMember); strings.Join(got, ",") != "miner,scout" {
		t.Errorf("Agents(member) %v; want miner, scout", got)
	}
	if got := tokens.Agents(mcpadapter.RoleLead); strings.Join(got, ",") != "lead" {
		t.Errorf("Agents(lead) %v; want lead", got)
	}

	// Add refuses bad names, bad roles and a second role for an agent.
	for name, add := range map[string]func() (string, error){
		"bad agent":    func() (string, error) { return tokens.Add("a::b", mcpadapter.RoleLead) },
		"empty agent":  func() (string, error) { return tokens.Add("", mcpadapter.RoleLead) },
		"bad role":     func() (string, error) { return tokens.Add("x", "admin") },
		"empty role":   func() (string, error) { return tokens.Add("x", "") },
		"second role":  func() (string, error) { return tokens.Add("scout", mcpadapter.RoleLead) },
		"lead → membr": func() (string, error) { return tokens.Add("lead", mcpadapter.RoleMember) },
	} {
		if tok, err := add(); err == nil {
			t.Errorf("%s: Add gave %q; want an error", name, tok)
		} else if strings.Contains(err.Error(), dir) {
			t.Errorf("%s: error %q names the state directory", name, err)
		}
	}

	// Revoke drops every token of the agent, in every opener.
	if n, err := tokens.Revoke("scout"); err != nil || n != 2 {
		t.Errorf("Revoke(scout) = %d, %v; want 2, nil", n, err)
	}
	clock.Advance(auth.TokenRecheck)
	for _, tok := range []string{mt, mt2} {
		if _, ok := other.Lookup(tok); ok {
			t.Errorf("another opener still accepts a revoked token")
		}
		if _, ok := tokens.Lookup(tok); ok {
			t.Errorf("a revoked token is still accepted")
		}
	}
	if n, err := tokens.Revoke("nobody"); err != nil || n != 0 {
		t.Errorf("Revoke(nobody) = %d, %v; want 0, nil", n, err)
	}
	if tokens.Len() != 2 {
		t.Errorf("Len %d; want 2 (lead, miner)", tokens.Len())
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file after rewrite: %v; want mode 0600", err)
	}
	noTempFiles(t, filepath.Dir(path))

	// Cleaning the sessions keeps the tokens.
	if err := st.Clean(); err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Lookup(lt); !ok {
		t.Errorf("Clean removed the tokens")
	}

	// A corrupt file fails closed.
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Advance(auth.TokenRecheck)
	if _, ok := other.Lookup(lt); ok {
		t.Errorf("Lookup accepted a token from a corrupt file")
	}
	if _, err := auth.OpenTokens(st); err == nil || strings.Contains(err.Error(), dir) {
		t.Errorf("OpenTokens on a corrupt file: %v; want an error without the path", err)
	}
}

// noTempFiles checks that no temporary token file is left in dir.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tokens-") {
			t.Errorf("temporary file %s left beside the token file", e.Name())
		}
	}
}

// hashLike returns the first stored hash, to check that a hash is not a
// token.
func hashLike(data []byte) string {
	var entries []struct {
		Hash string `json:"sha256"`
	}
	if json.Unmarshal(data, &entries) != nil || len(entries) == 0 {
		return "fst_x"
	}
	return "fst_" + entries[0].Hash
}
