package fleetstate

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The record appendRecord writes is what encoding/json writes, for any
// record.
func TestAppendRecordIsJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		str := func(label string) string {
			return rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z0-9<>&"\\\x00-\x1f\x{2028}\x{2029}]*`),
				rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")) })).Draw(t, label)
		}
		when := func(label string) time.Time {
			return time.Unix(rapid.Int64Range(-1e10, 1e10).Draw(t, label), rapid.Int64Range(0, 999999999).Draw(t, label+" ns")).UTC()
		}
		rec := turnRecord{ID: str("id"), Ticket: str("ticket"), Lead: str("lead"), Member: str("member"), Brief: str("brief"),
			Seq: rapid.Int64().Draw(t, "seq"), Created: when("created"), State: TicketState(str("state")), Question: str("question")}
		if rapid.Bool().Draw(t, "asked") {
			a := when("asked at")
			rec.Asked = &a
		}
		if rapid.Bool().Draw(t, "answer") {
			a := str("answer text")
			rec.Answer = &a
		}
		if rapid.Bool().Draw(t, "opened") {
			o := when("opened at")
			rec.Opened = &o
		}
		if rapid.Bool().Draw(t, "held until") {
			u := when("held until at")
			rec.HeldUntil = &u
		}
		if rapid.Bool().Draw(t, "held") {
			rec.Held = &Outcome{Kind: OutcomeKind(str("kind")), TurnID: str("turn"), Ticket: str("held ticket"), From: str("from"),
				Content: str("content"), Partial: rapid.Bool().Draw(t, "partial"), Reason: Reason(str("reason")),
				State: TicketState(str("held state")), Returned: rapid.Bool().Draw(t, "returned")}
		}
		want, err := json.Marshal(&rec)
		if err != nil {
			t.Fatal(err)
		}
		got := appendRecord(nil, &rec)
		// Byte for byte on the toolchain the project builds with; read
		// back alike on any (encoding/json spelled U+FFFD differently
		// before Go 1.27).
		var fromGot, fromWant turnRecord
		if err := json.Unmarshal(got, &fromGot); err != nil {
			t.Fatalf("appendRecord wrote what does not parse: %v\n%s", err, got)
		}
		if err := json.Unmarshal(want, &fromWant); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fromGot, fromWant) || strings.HasPrefix(runtime.Version(), "go1.27") && string(got) != string(want) {
			t.Fatalf("appendRecord =\n%s\nencoding/json =\n%s", got, want)
		}
	})
}
