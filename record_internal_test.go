package fleetstate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestAppendRecordIsJSON: the record the journal writes of a turn is the
// one encoding/json writes of it without HTML escaping, every field
// carried over to package record's encoder.
func TestAppendRecordIsJSON(t *testing.T) {
	at := time.Unix(1e9, 7).UTC()
	answer := "yes"
	for _, rec := range []turnRecord{
		{ID: "turn-1", Ticket: "tk-1", Lead: "lead", Member: "m1", Brief: "do <it> & \"tell\"", Seq: 3, Created: at, State: TicketQueued},
		{ID: "turn-2", Ticket: "tk-2", Lead: "lead", Member: "m1", Brief: "b", Seq: 4, Created: at, State: TicketQuestion,
			Question: "which?", Asked: &at, Answer: &answer, Opened: &at},
		{ID: "turn-3", Ticket: "tk-3", Lead: "lead", Member: "m1", Brief: "b", Seq: 5, Created: at, State: TicketDone, Opened: &at, HeldUntil: &at,
			Held: &Outcome{Kind: OutcomeFailed, TurnID: "turn-3", Ticket: "tk-3", From: "m1", Content: "tail", Partial: true,
				Reason: ReasonEchoedBrief, State: TicketDone, Returned: true}},
	} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&rec); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		got := appendRecord(nil, &rec)
		if string(got) != string(want) {
			t.Errorf("appendRecord =\n%s\nencoding/json =\n%s", got, want)
		}
		var back turnRecord
		if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, rec) {
			t.Errorf("read back %+v, %v; want %+v", back, err, rec)
		}
	}
}
