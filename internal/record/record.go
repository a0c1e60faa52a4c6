// Package record encodes a rendezvous's turn records: the JSON objects
// its journals keep, one per state change of a turn. A record is written
// at each step of every turn, so it is appended by hand, without
// reflection, as encoding/json would write it without HTML escaping (an
// Encoder with SetEscapeHTML(false)): the same fields, names, omissions
// and escapes, and a "<" of a brief one byte, not six. The tests hold it
// to encoding/json on every Go release: byte for byte where the release
// spells strings as this code does, and decoded alike on any.
package record

import (
	"strconv"
	"time"

	"github.com/fleetstate/fleetstate/internal/jsonstr"
	"github.com/fleetstate/fleetstate/internal/usage"
)

// Turn is a turn's record, its fields those of the rendezvous's record
// with their kinds as plain strings.
type Turn struct {
	ID        string        `json:"id"`
	Ticket    string        `json:"ticket"`
	Lead      string        `json:"lead"`
	Member    string        `json:"member"`
	Brief     string        `json:"brief"`
	Seq       int64         `json:"seq"`
	Created   time.Time     `json:"created"`
	State     string        `json:"state"`
	Question  string        `json:"question,omitempty"`
	Asked     *time.Time    `json:"asked,omitempty"`
	Answer    *string       `json:"answer,omitempty"`
	Held      *Outcome      `json:"held,omitempty"`
	Opened    *time.Time    `json:"opened,omitempty"`
	HeldUntil *time.Time    `json:"held_until,omitempty"`
	Usage     *usage.Tokens `json:"usage,omitempty"`
}

// Outcome is the outcome a finished turn holds.
type Outcome struct {
	Kind     string `json:"outcome"`
	TurnID   string `json:"turn_id,omitempty"`
	Ticket   string `json:"ticket,omitempty"`
	From     string `json:"from,omitempty"`
	Content  string `json:"content,omitempty"`
	Partial  bool   `json:"partial,omitempty"`
	Reason   string `json:"reason,omitempty"`
	State    string `json:"state,omitempty"`
	Returned bool   `json:"returned,omitempty"`
}

// Append appends the JSON of rec to b, as encoding/json writes it without
// HTML escaping.
func Append(b []byte, rec *Turn) []byte {
	b = append(b, `{"id":`...)
	b = jsonstr.AppendText(b, rec.ID)
	b = append(b, `,"ticket":`...)
	b = jsonstr.AppendText(b, rec.Ticket)
	b = append(b, `,"lead":`...)
	b = jsonstr.AppendText(b, rec.Lead)
	b = append(b, `,"member":`...)
	b = jsonstr.AppendText(b, rec.Member)
	b = append(b, `,"brief":`...)
	b = jsonstr.AppendText(b, rec.Brief)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, rec.Seq, 10)
	b = append(b, `,"created":`...)
	b = appendJSONTime(b, rec.Created)
	b = append(b, `,"state":`...)
	b = jsonstr.AppendText(b, rec.State)
	if rec.Question != "" {
		b = append(b, `,"question":`...)
		b = jsonstr.AppendText(b, rec.Question)
	}
	if rec.Asked != nil {
		b = append(b, `,"asked":`...)
		b = appendJSONTime(b, *rec.Asked)
	}
	if rec.Answer != nil {
		b = append(b, `,"answer":`...)
		b = jsonstr.AppendText(b, *rec.Answer)
	}
	if o := rec.Held; o != nil {
		b = append(b, `,"held":{"outcome":`...)
		b = jsonstr.AppendText(b, o.Kind)
		for _, f := range [...]struct{ name, v string }{
			{`,"turn_id":`, o.TurnID}, {`,"ticket":`, o.Ticket}, {`,"from":`, o.From}, {`,"content":`, o.Content},
		} {
			if f.v != "" {
				b = append(b, f.name...)
				b = jsonstr.AppendText(b, f.v)
			}
		}
		if o.Partial {
			b = append(b, `,"partial":true`...)
		}
		if o.Reason != "" {
			b = append(b, `,"reason":`...)
			b = jsonstr.AppendText(b, o.Reason)
		}
		if o.State != "" {
			b = append(b, `,"state":`...)
			b = jsonstr.AppendText(b, o.State)
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
	if u := rec.Usage; u != nil {
		b = append(b, `,"usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, u.Input, 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, u.Output, 10)
		if u.CacheRead != 0 {
			b = append(b, `,"cache_read_tokens":`...)
			b = strconv.AppendInt(b, u.CacheRead, 10)
		}
		if u.CacheWrite != 0 {
			b = append(b, `,"cache_write_tokens":`...)
			b = strconv.AppendInt(b, u.CacheWrite, 10)
		}
		b = append(b, '}')
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
