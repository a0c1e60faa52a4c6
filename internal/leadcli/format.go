package leadcli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/internal/textsafe"
	"github.com/fleetstate/fleetstate/internal/usage"
)

// FormatOutcome is the human form of an outcome: a line that says what
// it is, whose, and what to do next, then its text indented. The text
// comes from agents, so control characters other than newlines and tabs
// are shown escaped, never sent to the terminal.
func FormatOutcome(o fleetstate.Outcome) string {
	var b strings.Builder
	ids := ids(o)
	switch o.Kind {
	case fleetstate.OutcomeReply:
		fmt.Fprintf(&b, "reply from %s%s:\n", clean(o.From), ids)
	case fleetstate.OutcomeQuestion:
		fmt.Fprintf(&b, "question from %s%s: answer it with fleetstate answer %s TEXT\n", clean(o.From), ids, clean(o.TurnID))
	case fleetstate.OutcomeTurnDone:
		tail := "its pane's last lines"
		if o.Partial {
			tail += ", clipped"
		}
		fmt.Fprintf(&b, "turn done by %s without a reply%s; %s:\n", clean(o.From), ids, tail)
	case fleetstate.OutcomeFailed:
		fmt.Fprintf(&b, "failed: %s, the turn of %s%s:\n", clean(string(o.Reason)), clean(o.From), ids)
	case fleetstate.OutcomePending:
		state := string(o.State)
		if state == "" {
			state = "not done"
		}
		fmt.Fprintf(&b, "pending: ticket %s, %s, to %s (fleetstate poll %s collects it)\n", clean(o.Ticket), clean(state), clean(o.From), clean(o.Ticket))
		return b.String()
	default:
		fmt.Fprintf(&b, "%s from %s%s:\n", clean(string(o.Kind)), clean(o.From), ids)
	}
	if o.Content != "" {
		b.WriteString(indent(clean(o.Content)))
	}
	return b.String()
}

// ids says which ticket and turn an outcome is of, as " (ticket T, turn
// U)", or "" when it names neither.
func ids(o fleetstate.Outcome) string {
	var parts []string
	if o.Ticket != "" {
		parts = append(parts, "ticket "+clean(o.Ticket))
	}
	if o.TurnID != "" {
		parts = append(parts, "turn "+clean(o.TurnID))
	}
	if u := o.Usage; u != nil {
		parts = append(parts, "used "+FormatUsage(*u))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// FormatTickets is the human form of a lead's tickets, oldest first.
func FormatTickets(tickets []fleetstate.Outcome) string {
	if len(tickets) == 0 {
		return "no tickets\n"
	}
	var b strings.Builder
	for _, o := range tickets {
		b.WriteString(FormatOutcome(o))
	}
	return b.String()
}

// FormatMembers is the human form of the members, a table; now is the
// time the open turns' ages are counted to.
func FormatMembers(ms []fleetstate.MemberInfo, now time.Time) string {
	const none = "no members: add one with fleetstate token add --role member, or bring a fleet up with fleetstate up\n"
	var fleet fleetstate.Usage
	var cost float64
	priced, unpriced := false, false
	for _, m := range ms {
		fleet = fleet.Add(m.Usage)
		if m.Cost != nil {
			priced = true
			cost += *m.Cost
		}
		unpriced = unpriced || m.Unpriced
	}
	table := tabulate(ms, none, "MEMBER\tREADY\tSTATUS\tQUEUED\tOPEN TURN\tUSED", func(m fleetstate.MemberInfo) string {
		ready := "no"
		if m.Ready {
			ready = "yes"
		}
		open := "-"
		if m.OpenTurn != "" {
			open = clean(m.OpenTurn)
			if !m.OpenSince.IsZero() {
				open += " (" + age(now.Sub(m.OpenSince)) + ")"
			}
		}
		used := FormatUsage(m.Usage)
		if m.Cost != nil {
			used += ", cost " + FormatCost(*m.Cost, m.Unpriced)
		}
		return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s", clean(m.Name), ready, clean(m.Status), m.Queued, open, used)
	})
	if len(ms) == 0 {
		return table
	}
	used := FormatUsage(fleet)
	if priced {
		used += ", cost " + FormatCost(cost, unpriced)
	}
	return table + "fleet: used " + used + "\n"
}

// FormatCost spells a cost at the fleet's prices; unpriced says that some
// model used has no price, which the cost leaves out.
func FormatCost(c float64, unpriced bool) string {
	s := usage.FormatCost(c)
	if unpriced {
		s += " (and models with no price)"
	}
	return s
}

// FormatUsage spells tokens used as a person reads them: "12,400 in,
// 310 out", and what the cache read and wrote when it did.
func FormatUsage(u fleetstate.Usage) string {
	s := thousands(u.Input) + " in, " + thousands(u.Output) + " out"
	if u.CacheRead != 0 || u.CacheWrite != 0 {
		s += " (cache " + thousands(u.CacheRead) + " read, " + thousands(u.CacheWrite) + " written)"
	}
	return s
}

// thousands writes n with a comma every three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// tabulate formats items as a table under header, a row of tab-separated
// cells each, or returns none when there are none.
func tabulate[T any](items []T, none, header string, row func(T) string) string {
	if len(items) == 0 {
		return none
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	tw.Flush()
	return b.String()
}

// age spells a duration as a person reads an age: 45s, 3m, 2h.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return fmt.Sprintf("%dh", int(d/time.Hour))
}

// indent indents every line of text by two spaces and ends it with a
// newline.
func indent(text string) string {
	text = strings.TrimRight(text, "\n")
	return "  " + strings.ReplaceAll(text, "\n", "\n  ") + "\n"
}

// clean escapes the characters of s that a terminal would hide or obey
// (see [textsafe.EscapeText]), newlines and tabs aside, so that text
// from an agent cannot drive the terminal it is printed on.
func clean(s string) string { return textsafe.EscapeText(s) }

// maxInput is how many characters of a request's input its row shows.
const maxInput = 80

// FormatRequests formats the pending permission requests as a table, the
// command (or file, or URL) of each rather than its input's JSON,
// escaped (see [textsafe.Escape]) and clipped with a mark that says how
// much more [FormatRequest] would show.
func FormatRequests(ps []fleetstate.PermissionRequest, now time.Time) string {
	clipped := false
	out := tabulate(ps, "no permission requests waiting\n", "ID\tMEMBER\tTOOL\tAGE\tCWD\tINPUT", func(p fleetstate.PermissionRequest) string {
		input := textsafe.Quote(agent.MainInput(p.Tool, p.Input), maxInput)
		clipped = clipped || !strings.HasSuffix(input, `"`)
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", textsafe.Escape(p.ID), textsafe.Escape(p.Member), textsafe.Clip(p.Tool, 40),
			age(now.Sub(p.Asked)), textsafe.Clip(p.Cwd, 40), input)
	})
	if clipped {
		out += "fleetstate requests ID shows a request whole\n"
	}
	return out
}

// FormatRequest formats one permission request whole: who asks, for
// which tool, where, and its input, escaped (see [textsafe.Escape]) and
// never clipped: the main input (the command, file or URL) and the
// input's whole JSON.
func FormatRequest(p fleetstate.PermissionRequest, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "request %s\n", textsafe.Escape(p.ID))
	fmt.Fprintf(&b, "  member: %s\n  tool:   %s\n  cwd:    %s\n", textsafe.Escape(p.Member), textsafe.Escape(p.Tool), textsafe.Escape(p.Cwd))
	fmt.Fprintf(&b, "  asked:  %s ago", age(now.Sub(p.Asked)))
	if !p.Deadline.IsZero() {
		fmt.Fprintf(&b, "; ends undecided in %s", age(p.Deadline.Sub(now)))
	}
	b.WriteString("\nescaped: \\n is a line break, \\t a tab, \\u202e an invisible character, \\\\ a backslash\n")
	main := agent.MainInput(p.Tool, p.Input)
	if main != p.Input {
		fmt.Fprintf(&b, "main input:\n  %s\n", textsafe.Escape(main))
	}
	fmt.Fprintf(&b, "input:\n  %s\n", textsafe.Escape(p.Input))
	if p.InputBytes > 0 {
		fmt.Fprintf(&b, "(clipped: %d of %d bytes)\n", len(p.Input), p.InputBytes)
	}
	return b.String()
}
