package fleetstate_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/fleetstatetest"
	"github.com/google/uuid"
	"github.com/spf13/afero"
)

// osFS is the disk, in a fresh temporary directory of the test.
func osFS(t *testing.T) (afero.Fs, string) {
	return afero.NewOsFs(), filepath.Join(t.TempDir(), "state")
}

// TestStoreOS runs the store contract (package fleetstatetest) on the operating system's file system.
func TestStoreOS(t *testing.T) { fleetstatetest.TestStateDir(t, osFS) }

func TestOpenDefaultsOS(t *testing.T) {
	t.Run("WorkingDirectory", func(t *testing.T) {
		t.Setenv(fleetstate.EnvStateDir, "")
		wd := t.TempDir()
		t.Chdir(wd)
		st := open(t, nil, "", nil)
		if got, want := st.Dir(), filepath.Join(wd, fleetstate.DefaultDirName); got != want {
			t.Fatalf("Dir() = %q; want %q", got, want)
		}
		if _, ok := st.Fs().(*afero.OsFs); !ok {
			t.Fatalf("Fs() = %T; want *afero.OsFs for a nil file system", st.Fs())
		}
		// The directory was made absolute once: a later change of the
		// working directory does not move the store.
		t.Chdir(t.TempDir())
		newSession(t, st, "s")
		id := put(t, st, "scout", "a.md", "here", false)
		got, err := os.ReadFile(filepath.Join(wd, fleetstate.DefaultDirName, id.Session(), "scout", "a.md"))
		if err != nil || string(got) != "here" {
			t.Fatalf("file in the first working directory = %q, %v; want %q", got, err, "here")
		}
	})
	t.Run("RelativeEnv", func(t *testing.T) {
		wd := t.TempDir()
		t.Chdir(wd)
		t.Setenv(fleetstate.EnvStateDir, "rel/state")
		st := open(t, nil, "", nil)
		if got, want := st.Dir(), filepath.Join(wd, "rel", "state"); got != want {
			t.Fatalf("Dir() = %q; want %q", got, want)
		}
	})
}

func TestPermissionsOS(t *testing.T) {
	st, sess := setupSession(t, storeMaker{fs: osFS}, nil)
	put(t, st, "scout", "nested/dir/notes.md", "x", false)
	put(t, st, "scout", "nested/dir/notes.md", "y", true)
	newSession(t, st, "second") // writes previous_run_log.txt
	tests := []struct {
		rel  string
		want fs.FileMode
	}{
		{".", fs.ModeDir | 0o700},
		{".fleetstate", fs.ModeDir | 0o700},
		{sess.ID, fs.ModeDir | 0o700},
		{sess.ID + "/scout", fs.ModeDir | 0o700},
		{sess.ID + "/scout/nested", fs.ModeDir | 0o700},
		{sess.ID + "/scout/nested/dir", fs.ModeDir | 0o700},
		{sess.ID + "/scout/nested/dir/notes.md", 0o600},
		{"current_run.txt", 0o600},
		{"previous_run_log.txt", 0o600},
	}
	for _, tc := range tests {
		t.Run(tc.rel, func(t *testing.T) {
			fi, err := os.Lstat(filepath.Join(st.Dir(), filepath.FromSlash(tc.rel)))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode(); got != tc.want {
				t.Fatalf("mode of %s = %v; want %v", tc.rel, got, tc.want)
			}
		})
	}
}

// TestLayoutCompatibilityOS builds, with plain OS calls, a state directory
// the way fleet-state-mgr writes it and reads it back through the store.
func TestLayoutCompatibilityOS(t *testing.T) {
	for _, currentRun := range []string{"%s:::ts session", "%s:::ts session\n"} {
		t.Run(fmt.Sprintf("current_run=%q", currentRun), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), ".ai-fleet-state")
			older, cur := uuid.NewString(), uuid.NewString()
			files := map[string]string{
				"current_run.txt":                       fmt.Sprintf(currentRun, cur),
				"previous_run_log.txt":                  older + ":::older run\n",
				older + "/scout/notes.md":               "old notes",
				cur + "/agent/nested/dir/file.md":       "# nested\n",
				cur + "/agent/top.txt":                  "top",
				cur + "/other-agent/code.ts":            "export const x = 1\n",
				cur + "/other-agent/with::colons/x::y":  "colons",
				cur + "/other-agent/deep/er/and/er.txt": "",
			}
			for rel, content := range files {
				p := filepath.Join(dir, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}

			st := open(t, nil, dir, nil)
			sess, err := st.CurrentSession()
			if err != nil || sess != (fleetstate.Session{ID: cur, Name: "ts session"}) {
				t.Fatalf("CurrentSession() = %v, %v; want %s:::ts session", sess, err, cur)
			}
			for rel, content := range files {
				session, rest, _ := strings.Cut(rel, "/")
				agent, name, ok := strings.Cut(rest, "/")
				if !ok {
					continue // current_run.txt, previous_run_log.txt
				}
				id, err := fleetstate.ParseFileID("fsm::file::" + session + "::" + agent + "::" + name)
				if err != nil {
					t.Fatalf("ParseFileID for %s: %v", rel, err)
				}
				if got := get(t, st, id); got != content {
					t.Errorf("Get(%s) = %q; want %q", rel, got, content)
				}
			}
			listed, err := st.List("", "")
			if err != nil {
				t.Fatalf("List error: %v", err)
			}
			wantList := []string{
				"agent/nested/dir/file.md", "agent/top.txt", "other-agent/code.ts",
				"other-agent/deep/er/and/er.txt", "other-agent/with::colons/x::y",
			}
			if got := idStrings(listed); !slices.Equal(got, wantList) {
				t.Fatalf("List = %q; want %q", got, wantList)
			}
			for _, f := range listed {
				if want := int64(len(files[cur+"/"+f.ID.Agent()+"/"+f.ID.Name()])); f.Size != want {
					t.Errorf("Size of %v = %d; want %d", f.ID, f.Size, want)
				}
			}
			if listed, err := st.List(older, "scout"); err != nil || len(listed) != 1 || listed[0].ID.Name() != "notes.md" {
				t.Fatalf("List(older, scout) = %v, %v; want notes.md", listed, err)
			}

			// Writes land where fleet-state-mgr would put them.
			put(t, st, "agent", "nested/new.md", "from go", false)
			if got, err := os.ReadFile(filepath.Join(dir, cur, "agent", "nested", "new.md")); err != nil || string(got) != "from go" {
				t.Fatalf("file written by Put = %q, %v; want %q", got, err, "from go")
			}
			_, err = st.Put("agent", "top.txt", []byte("x"), false)
			wantErr(t, st, err, fleetstate.CodeFileExists)

			next := newSession(t, st, "next")
			log, err := os.ReadFile(filepath.Join(dir, "previous_run_log.txt"))
			if want := older + ":::older run\n" + cur + ":::ts session\n"; err != nil || string(log) != want {
				t.Fatalf("previous_run_log.txt = %q, %v; want %q", log, err, want)
			}
			run, err := os.ReadFile(filepath.Join(dir, "current_run.txt"))
			if want := next.ID + ":::next"; err != nil || string(run) != want {
				t.Fatalf("current_run.txt = %q, %v; want %q", run, err, want)
			}
			// Only the store's private folder was added at the top.
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			want := []string{".fleetstate", "current_run.txt", "previous_run_log.txt", older, cur}
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Fatalf("top of the state directory = %q; want %q", names, want)
			}
		})
	}
}

// TestSymlinkEscapeOS plants symbolic links inside the state directory that
// lead out of it: the store neither reads nor writes through them.
func TestSymlinkEscapeOS(t *testing.T) {
	const secret = "top secret"
	tests := []struct {
		name      string
		link      string // below the session directory
		toFile    bool   // the link points at the secret file, not its folder
		relative  bool   // the link target is relative
		agent     string // what Get and Put use to go through the link
		file      string
		listAgent string
	}{
		{"AgentFolder", "evil", false, false, "evil", "secret.txt", "evil"},
		{"Folder", "scout/link", false, false, "scout", "link/secret.txt", "scout"},
		{"DeepFolder", "scout/a/b", false, false, "scout", "a/b/secret.txt", "scout"},
		{"RelativeFolder", "scout/rel", false, true, "scout", "rel/secret.txt", "scout"},
		{"File", "scout/secret.txt", true, false, "scout", "secret.txt", "scout"},
		{"RelativeFile", "scout/secret.txt", true, true, "scout", "secret.txt", "scout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, sess := setupSession(t, storeMaker{fs: osFS}, nil)
			outside := filepath.Join(filepath.Dir(st.Dir()), "outside")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644); err != nil {
				t.Fatal(err)
			}
			put(t, st, "scout", "real.md", "mine", false)
			linkPath := filepath.Join(st.Dir(), sess.ID, filepath.FromSlash(tc.link))
			target := outside
			if tc.toFile {
				target = filepath.Join(outside, "secret.txt")
			}
			if tc.relative {
				var err error
				if target, err = filepath.Rel(filepath.Dir(linkPath), target); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(filepath.Dir(linkPath), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, linkPath); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(st.Dir(), sess.ID, tc.agent, filepath.FromSlash(tc.file))); err != nil || string(got) != secret {
				t.Fatalf("the planted link does not lead to the secret: %q, %v", got, err)
			}

			unchanged(t, st, func() {
				data, err := st.Get(fileID(t, sess.ID, tc.agent, tc.file))
				wantErr(t, st, err, fleetstate.CodePathEscape)
				if data != nil {
					t.Fatalf("Get through a link returned %q; want nil", data)
				}
				names := []string{tc.file}
				if !tc.toFile {
					names = append(names, strings.TrimSuffix(tc.file, "secret.txt")+"new.md")
				}
				for _, name := range names {
					for _, overwrite := range []bool{false, true} {
						_, err := st.Put(tc.agent, name, []byte("planted"), overwrite)
						wantErr(t, st, err, fleetstate.CodePathEscape)
					}
				}
				files, err := st.List("", "")
				if err != nil {
					t.Fatalf("List error: %v", err)
				}
				if got, want := idStrings(files), []string{"scout/real.md"}; !slices.Equal(got, want) {
					t.Fatalf("List = %q; want %q", got, want)
				}
				files, err = st.List(sess.ID, tc.listAgent)
				for _, f := range files {
					if f.ID.Name() != "real.md" {
						t.Fatalf("List(session, %q) listed %v through the link", tc.listAgent, f.ID)
					}
				}
				if err != nil {
					wantErr(t, st, err, fleetstate.CodePathEscape)
				}
			})

			// Clean removes the link, not what it points at.
			if err := st.Clean(); err != nil {
				t.Fatalf("Clean error: %v", err)
			}
			if got, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(got) != secret {
				t.Fatalf("secret after Clean = %q, %v; want it untouched", got, err)
			}
		})
	}

	t.Run("SessionFolder", func(t *testing.T) {
		st := setup(t, storeMaker{fs: osFS}, nil)
		outside := filepath.Join(filepath.Dir(st.Dir()), "outside")
		if err := os.MkdirAll(filepath.Join(outside, "scout"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "scout", "secret.txt"), []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		sess := newSession(t, st, "linked")
		if err := os.Symlink(outside, filepath.Join(st.Dir(), sess.ID)); err != nil {
			t.Fatal(err)
		}
		unchanged(t, st, func() {
			_, err := st.Get(fileID(t, sess.ID, "scout", "secret.txt"))
			wantErr(t, st, err, fleetstate.CodePathEscape)
			for _, overwrite := range []bool{false, true} {
				_, err = st.Put("scout", "secret.txt", []byte("planted"), overwrite)
				wantErr(t, st, err, fleetstate.CodePathEscape)
				_, err = st.Put("scout", "new.md", []byte("planted"), overwrite)
				wantErr(t, st, err, fleetstate.CodePathEscape)
			}
			for _, session := range []string{"", sess.ID} {
				for _, agent := range []string{"", "scout"} {
					files, err := st.List(session, agent)
					wantErr(t, st, err, fleetstate.CodePathEscape)
					if len(files) != 0 {
						t.Fatalf("List(%q, %q) listed %v through the link", session, agent, files)
					}
				}
			}
		})
		if err := st.Clean(); err != nil {
			t.Fatalf("Clean error: %v", err)
		}
		if got, err := os.ReadFile(filepath.Join(outside, "scout", "secret.txt")); err != nil || string(got) != secret {
			t.Fatalf("secret after Clean = %q, %v; want it untouched", got, err)
		}
	})

	t.Run("LinkInsideStateDir", func(t *testing.T) {
		// Even a link that stays inside the state directory is not followed.
		st, sess := setupSession(t, storeMaker{fs: osFS}, nil)
		put(t, st, "scout", "notes.md", "x", false)
		if err := os.Symlink("scout", filepath.Join(st.Dir(), sess.ID, "alias")); err != nil {
			t.Fatal(err)
		}
		_, err := st.Get(fileID(t, sess.ID, "alias", "notes.md"))
		wantErr(t, st, err, fleetstate.CodePathEscape)
	})
}

// ---- several processes on one directory -------------------------------------

// Environment of a child process started by startHelpers.
const (
	helperEnv    = "FLEETSTATE_TEST_HELPER" // its role; set only in children
	helperDirEnv = "FLEETSTATE_TEST_DIR"    // the state directory
	helperArgEnv = "FLEETSTATE_TEST_ARG"    // its argument
)

// Rounds of a helper: each child races the others this many times.
const (
	helperPutRounds     = 5
	helperSessionRounds = 5
)

// helperProcess is the body of a child process, run by TestMain in place of
// the tests. It opens the store, says "ready", waits until its standard
// input is closed (the start barrier: the parent closes every child's input
// at once) and then does its part, printing one line per result.
func helperProcess(role string) int {
	st, err := fleetstate.Open(nil, os.Getenv(helperDirEnv), &fleetstate.Options{NoGitIgnore: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	fmt.Println("ready")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "barrier:", err)
		return 2
	}
	arg := os.Getenv(helperArgEnv)
	switch role {
	case "put":
		for k := range helperPutRounds {
			_, err := st.Put("racer", fmt.Sprintf("claim-%d.txt", k), []byte(arg), false)
			code := string(fleetstate.CodeOf(err))
			if code == "" {
				code = "ok"
			}
			fmt.Println(k, code)
		}
	case "sessions":
		for k := range helperSessionRounds {
			sess, err := st.NewSession(fmt.Sprintf("%s-%d", arg, k))
			if err != nil {
				fmt.Fprintln(os.Stderr, "new session:", err)
				return 2
			}
			fmt.Println(sess.String())
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown role", role)
		return 2
	}
	return 0
}

type helper struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
	waited bool
}

// runHelpers runs n copies of this test binary as helper processes in role
// on the state directory dir, releases them at once when all are ready and
// returns the lines each printed after "ready". Children that are still
// running when the test ends are killed.
func runHelpers(t *testing.T, n int, role, dir string) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	helpers := make([]*helper, 0, n)
	stop := func() {
		for _, h := range helpers {
			if !h.waited {
				_ = h.cmd.Process.Kill()
				_ = h.cmd.Wait()
				h.waited = true
			}
		}
	}
	defer stop()
	failf := func(format string, args ...any) {
		t.Helper()
		stop()
		var stderr strings.Builder
		for i, h := range helpers {
			if h.stderr.Len() > 0 {
				fmt.Fprintf(&stderr, "\nchild %d stderr: %s", i, h.stderr.String())
			}
		}
		t.Fatalf(format+"%s", append(args, stderr.String())...)
	}
	for i := range n {
		h := &helper{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$")}
		h.cmd.Env = append(os.Environ(),
			helperEnv+"="+role, helperDirEnv+"="+dir, helperArgEnv+"="+fmt.Sprintf("child%d", i))
		h.cmd.Stderr = &h.stderr
		stdin, err := h.cmd.StdinPipe()
		if err != nil {
			failf("StdinPipe: %v", err)
		}
		stdout, err := h.cmd.StdoutPipe()
		if err != nil {
			failf("StdoutPipe: %v", err)
		}
		h.stdin, h.stdout = stdin, bufio.NewReader(stdout)
		if err := h.cmd.Start(); err != nil {
			failf("starting child %d: %v", i, err)
		}
		helpers = append(helpers, h)
	}
	for i, h := range helpers {
		if line, err := h.stdout.ReadString('\n'); line != "ready\n" {
			failf("child %d said %q, %v; want \"ready\"", i, line, err)
		}
	}
	for _, h := range helpers { // the start barrier
		h.stdin.Close()
	}
	out := make([][]string, n)
	for i, h := range helpers {
		rest, err := io.ReadAll(h.stdout)
		if err != nil {
			failf("reading child %d: %v", i, err)
		}
		h.waited = true
		if err := h.cmd.Wait(); err != nil {
			failf("child %d: %v", i, err)
		}
		out[i] = strings.Split(strings.TrimSuffix(string(rest), "\n"), "\n")
	}
	return out
}

// TestMultiProcessCreateOS races OS processes that put the same new names
// without overwrite: for each name exactly one wins, the others get
// ERR_FILE_EXISTS, and the file holds the winner's content.
func TestMultiProcessCreateOS(t *testing.T) {
	const children = 8
	st, sess := setupSession(t, storeMaker{fs: osFS}, &fleetstate.Options{NoGitIgnore: true})
	out := runHelpers(t, children, "put", st.Dir())
	for k := range helperPutRounds {
		winner := -1
		for i, lines := range out {
			if len(lines) != helperPutRounds {
				t.Fatalf("child %d printed %q; want %d results", i, lines, helperPutRounds)
			}
			switch lines[k] {
			case fmt.Sprintf("%d ok", k):
				if winner >= 0 {
					t.Fatalf("claim-%d.txt: children %d and %d both created it; want one", k, winner, i)
				}
				winner = i
			case fmt.Sprintf("%d %s", k, fleetstate.CodeFileExists):
			default:
				t.Fatalf("claim-%d.txt: child %d got %q; want ok or %s", k, i, lines[k], fleetstate.CodeFileExists)
			}
		}
		if winner < 0 {
			t.Fatalf("claim-%d.txt: no child created it; want one", k)
		}
		name := fmt.Sprintf("claim-%d.txt", k)
		if got, want := get(t, st, fileID(t, sess.ID, "racer", name)), fmt.Sprintf("child%d", winner); got != want {
			t.Fatalf("%s = %q; want the winner's %q", name, got, want)
		}
	}
	assertNoTempFiles(t, st)
}

// TestMultiProcessSessionsOS starts sessions from several OS processes at
// once: no archived line is lost or torn and current_run.txt stays whole.
func TestMultiProcessSessionsOS(t *testing.T) {
	const children = 8
	st, first := setupSession(t, storeMaker{fs: osFS}, &fleetstate.Options{NoGitIgnore: true})
	out := runHelpers(t, children, "sessions", st.Dir())
	created := make([][]fleetstate.Session, children)
	for i, lines := range out {
		if len(lines) != helperSessionRounds {
			t.Fatalf("child %d printed %q; want %d sessions", i, lines, helperSessionRounds)
		}
		for _, line := range lines {
			id, name, ok := strings.Cut(line, ":::")
			if !ok || !isLowerUUID(id) {
				t.Fatalf("child %d printed %q; want ID:::NAME", i, line)
			}
			created[i] = append(created[i], fleetstate.Session{ID: id, Name: name})
		}
	}
	checkSessionLog(t, st, first, created, children*helperSessionRounds)
	assertNoTempFiles(t, st)
}
