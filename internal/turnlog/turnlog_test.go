package turnlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// fake records the calls it gets, as "op id rec saved".
type fake struct {
	calls     []string
	deadlines []bool // whether each call's context had a deadline
	fail      error
	abandoned bool
}

func (f *fake) note(ctx context.Context, s string) error {
	_, ok := ctx.Deadline()
	f.calls, f.deadlines = append(f.calls, s), append(f.deadlines, ok)
	return f.fail
}

func (f *fake) Load(ctx context.Context) ([][]byte, error) {
	return [][]byte{[]byte("r")}, f.note(ctx, "load")
}
func (f *fake) Save(ctx context.Context, id string, rec []byte) error {
	return f.note(ctx, "save "+id+" "+string(rec))
}
func (f *fake) Hold(ctx context.Context, id string, rec []byte, saved bool) error {
	return f.note(ctx, fmt.Sprintf("hold %s %s %v", id, rec, saved))
}
func (f *fake) Release(ctx context.Context, id string) error { return f.note(ctx, "release "+id) }
func (f *fake) Flush(ctx context.Context) error              { return f.note(ctx, "flush") }
func (f *fake) Reset(ctx context.Context) error              { return f.note(ctx, "reset") }
func (f *fake) Close() error                                 { f.calls = append(f.calls, "close"); return f.fail }
func (f *fake) Abandon()                                     { f.abandoned = true }

func TestSettleHoldsWhatTheStepHanded(t *testing.T) {
	f := &fake{}
	l := New(f, 0, t.Logf)
	rec := []byte("one")
	l.Hold("t1", rec, false)
	copy(rec, "xxx") // the caller reuses its buffer
	l.Hold("t2", []byte("two"), true)
	l.Hold("t3", []byte("three"), false)
	l.Unhold("t2")
	if err := l.Release("t3"); err != nil {
		t.Fatal(err)
	}
	l.Settle()
	want := []string{"release t3", "hold t1 one false", "flush"}
	if !slices.Equal(f.calls, want) {
		t.Fatalf("calls %q, want %q", f.calls, want)
	}
	f.calls = nil
	l.Settle()
	if !slices.Equal(f.calls, []string{"flush"}) {
		t.Fatalf("a second settle made %q; want only a flush", f.calls)
	}
}

func TestTimeoutBoundsEveryCall(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Minute} {
		f := &fake{}
		l := New(f, timeout, t.Logf)
		_, _ = l.Load()
		_ = l.Save("t", nil)
		l.Hold("t", nil, false)
		l.Settle()
		_ = l.Reset()
		for i, ok := range f.deadlines {
			if ok != (timeout > 0) {
				t.Errorf("timeout %v: call %q has a deadline: %v", timeout, f.calls[i], ok)
			}
		}
	}
}

func TestCloseAndCrashWriteNothingMore(t *testing.T) {
	f := &fake{}
	l := New(f, 0, t.Logf)
	l.Hold("t1", []byte("r"), false)
	l.Close()
	l.Close()
	want := []string{"hold t1 r false", "flush", "close"}
	if !slices.Equal(f.calls, want) || !l.Closed() {
		t.Fatalf("calls %q, closed %v; want %q, closed", f.calls, l.Closed(), want)
	}
	l.Hold("t2", []byte("r"), false)
	l.Settle()
	if len(f.calls) != len(want) {
		t.Fatalf("a closed log wrote %q", f.calls[len(want):])
	}

	g := &fake{}
	c := New(g, 0, t.Logf)
	c.Hold("t1", []byte("r"), false)
	c.Crash()
	c.Settle()
	if len(g.calls) != 0 || !g.abandoned || !c.Closed() {
		t.Fatalf("after a crash: calls %q, abandoned %v", g.calls, g.abandoned)
	}
}

func TestFailuresNoCallerHearsOfAreLogged(t *testing.T) {
	f := &fake{fail: errors.New("disk full")}
	var logged []string
	l := New(f, 0, func(msg string, args ...any) { logged = append(logged, msg) })
	l.Hold("t1", []byte("r"), false)
	l.Settle()
	l.Close()
	if got := strings.Join(logged, "; "); got != "fleetstate: hold a returned outcome; fleetstate: flush the journal; fleetstate: flush the journal; fleetstate: close the journal" {
		t.Fatalf("logged %q", got)
	}
	if err := l.Save("t", nil); err == nil {
		t.Fatal("Save hid the journal's error")
	}
}

func TestForgetLogsWhatFails(t *testing.T) {
	f := &fake{}
	var logged []string
	l := New(f, 0, func(msg string, args ...any) { logged = append(logged, fmt.Sprint(append([]any{msg}, args...)...)) })
	l.Hold("t1", []byte("r"), false)
	l.Forget("t1", "a finished turn")
	if want := []string{"release t1"}; !slices.Equal(f.calls, want) || len(logged) != 0 {
		t.Fatalf("calls %q, logged %q; want %q and nothing logged", f.calls, logged, want)
	}
	f.fail = errors.New("disk full")
	l.Forget("t2", "a permission request")
	if len(logged) != 1 || !strings.Contains(logged[0], "fleetstate: forget a permission request") || !strings.Contains(logged[0], "t2") {
		t.Fatalf("logged %q; want the failure to forget t2", logged)
	}
}
