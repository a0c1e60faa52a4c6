package record

import (
	"bytes"
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fleetstate/fleetstate/internal/usage"
)

// marshal returns rec's JSON as encoding/json writes it without HTML
// escaping, which Append mirrors.
func marshal(rec *Turn) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(rec)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// TestAppendIsJSON: what Append writes is what encoding/json writes, for
// any record: byte for byte on the release the code mirrors (Go 1.27
// writes an invalid byte as the raw U+FFFD, as Append does; earlier
// releases spell it \ufffd), and read back alike on any.
func TestAppendIsJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rec := drawTurn(t)
		want, err := marshal(&rec)
		if err != nil {
			t.Fatal(err)
		}
		got := Append(nil, &rec)
		var fromGot, fromWant Turn
		if err := json.Unmarshal(got, &fromGot); err != nil {
			t.Fatalf("Append wrote what does not parse: %v\n%s", err, got)
		}
		if err := json.Unmarshal(want, &fromWant); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fromGot, fromWant) || strings.HasPrefix(runtime.Version(), "go1.27") && string(got) != string(want) {
			t.Fatalf("Append =\n%s\nencoding/json =\n%s", got, want)
		}
	})
}

// FuzzAppend is TestAppendIsJSON's comparison for a brief and a content
// the fuzzer chooses.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "<a>&amp;</a>", "\x00\x1f\\\"", "é😀\u2028", "\xff\xfe bad \xc3"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, brief, content string) {
		at := time.Unix(1e9, 5).UTC()
		rec := Turn{ID: "t", Ticket: "k", Lead: "lead", Member: "m", Brief: brief, Created: at, State: "done",
			Held: &Outcome{Kind: "reply", Content: content}}
		want, _ := marshal(&rec)
		got := Append(nil, &rec)
		var fromGot, fromWant Turn
		if err := json.Unmarshal(got, &fromGot); err != nil {
			t.Fatalf("Append wrote what does not parse: %v\n%s", err, got)
		}
		_ = json.Unmarshal(want, &fromWant)
		if !reflect.DeepEqual(fromGot, fromWant) || strings.HasPrefix(runtime.Version(), "go1.27") && string(got) != string(want) {
			t.Fatalf("Append =\n%s\nencoding/json =\n%s", got, want)
		}
	})
}

func drawTurn(t *rapid.T) Turn {
	str := func(label string) string {
		return rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z0-9<>&"\\\x00-\x1f\x{2028}\x{2029}]*`),
			rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")) })).Draw(t, label)
	}
	when := func(label string) time.Time {
		return time.Unix(rapid.Int64Range(-1e10, 1e10).Draw(t, label), rapid.Int64Range(0, 999999999).Draw(t, label+" ns")).UTC()
	}
	maybe := func(label string) *time.Time {
		if !rapid.Bool().Draw(t, label) {
			return nil
		}
		w := when(label + " at")
		return &w
	}
	rec := Turn{ID: str("id"), Ticket: str("ticket"), Lead: str("lead"), Member: str("member"), Brief: str("brief"),
		Seq: rapid.Int64().Draw(t, "seq"), Created: when("created"), State: str("state"), Question: str("question"),
		Asked: maybe("asked"), Opened: maybe("opened"), HeldUntil: maybe("held until")}
	if rapid.Bool().Draw(t, "answer") {
		a := str("answer text")
		rec.Answer = &a
	}
	if rapid.Bool().Draw(t, "held") {
		rec.Held = &Outcome{Kind: str("kind"), TurnID: str("turn"), Ticket: str("held ticket"), From: str("from"),
			Content: str("content"), Partial: rapid.Bool().Draw(t, "partial"), Reason: str("reason"),
			State: str("held state"), Returned: rapid.Bool().Draw(t, "returned")}
	}
	if rapid.Bool().Draw(t, "usage") {
		n := func(label string) int64 { return rapid.Int64Range(0, 1<<40).Draw(t, label) }
		rec.Usage = &usage.Tokens{Input: n("input"), Output: n("output"), CacheRead: n("cache read"), CacheWrite: n("cache write")}
	}
	return rec
}

// TestAppendKeepsHTMLAsIs: a brief of "<" costs its own length in the
// record, not six times it, and reads back the same.
func TestAppendKeepsHTMLAsIs(t *testing.T) {
	brief := strings.Repeat("<&>", 1000)
	rec := Turn{ID: "t", Ticket: "k", Lead: "lead", Member: "m", Brief: brief, State: "queued"}
	got := Append(nil, &rec)
	if !strings.Contains(string(got), `"brief":"`+brief+`"`) || len(got) > len(brief)+200 {
		t.Fatalf("Append wrote %d bytes for a brief of %d; want the brief as it is", len(got), len(brief))
	}
	var back Turn
	if err := json.Unmarshal(got, &back); err != nil || back.Brief != brief {
		t.Fatalf("read back: %v, brief intact %v", err, back.Brief == brief)
	}
}
