package fleetstate

import (
	"strconv"
	"time"

	"github.com/fleetstate/fleetstate/internal/jsonstr"
)

// appendRecord appends the JSON of rec to b, as encoding/json would write
// it (the same fields, names and omissions; strings escaped alike), without
// reflection: a turn's record is written at each of its state changes, and
// reflection made most of a round trip's cost. TestAppendRecordIsJSON holds
// it to encoding/json.
func appendRecord(b []byte, rec *turnRecord) []byte {
	b = append(b, `{"id":`...)
	b = jsonstr.Append(b, rec.ID)
	b = append(b, `,"ticket":`...)
	b = jsonstr.Append(b, rec.Ticket)
	b = append(b, `,"lead":`...)
	b = jsonstr.Append(b, rec.Lead)
	b = append(b, `,"member":`...)
	b = jsonstr.Append(b, rec.Member)
	b = append(b, `,"brief":`...)
	b = jsonstr.Append(b, rec.Brief)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, rec.Seq, 10)
	b = append(b, `,"created":`...)
	b = appendJSONTime(b, rec.Created)
	b = append(b, `,"state":`...)
	b = jsonstr.Append(b, string(rec.State))
	if rec.Question != "" {
		b = append(b, `,"question":`...)
		b = jsonstr.Append(b, rec.Question)
	}
	if rec.Asked != nil {
		b = append(b, `,"asked":`...)
		b = appendJSONTime(b, *rec.Asked)
	}
	if rec.Answer != nil {
		b = append(b, `,"answer":`...)
		b = jsonstr.Append(b, *rec.Answer)
	}
	if o := rec.Held; o != nil {
		b = append(b, `,"held":{"outcome":`...)
		b = jsonstr.Append(b, string(o.Kind))
		for _, f := range [...]struct{ name, v string }{
			{`,"turn_id":`, o.TurnID}, {`,"ticket":`, o.Ticket}, {`,"from":`, o.From}, {`,"content":`, o.Content},
		} {
			if f.v != "" {
				b = append(b, f.name...)
				b = jsonstr.Append(b, f.v)
			}
		}
		if o.Partial {
			b = append(b, `,"partial":true`...)
		}
		if o.Reason != "" {
			b = append(b, `,"reason":`...)
			b = jsonstr.Append(b, string(o.Reason))
		}
		if o.State != "" {
			b = append(b, `,"state":`...)
			b = jsonstr.Append(b, string(o.State))
		}
		if o.Returned {
			b = append(b, `,"returned":true`...)
		}
		b = append(b, '}')
	}
	if rec.Opened != nil {
		b = append(b, `,"opened":`...)
		b = appendJSONTime(b, *rec.Opened)
	}
	if rec.HeldUntil != nil {
		b = append(b, `,"held_until":`...)
		b = appendJSONTime(b, *rec.HeldUntil)
	}
	return append(b, '}')
}

// appendJSONTime appends t as encoding/json writes a time: RFC 3339 with
// nanoseconds, quoted.
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"
