package leadcli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/agent"
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
	if len(ms) == 0 {
		return "no members: add one with fleetstate token add --role member, or bring a fleet up with fleetstate up\n"
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tREADY\tSTATUS\tQUEUED\tOPEN TURN")
	for _, m := range ms {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", clean(m.Name), ready, clean(m.Status), m.Queued, open)
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

// clean escapes the control characters of s other than newline and tab,
// and invalid UTF-8, so that text from an agent cannot drive the
// terminal it is printed on.
func clean(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == unicode.ReplacementChar && !strings.HasPrefix(s[i:], string(unicode.ReplacementChar)):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return r != '\n' && r != '\t' && (unicode.IsControl(r) || r == unicode.ReplacementChar ||
		r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r))
}

// FormatRequests formats the pending permission requests as a table, the
// command (or file, or URL) of each rather than its input's JSON.
func FormatRequests(ps []fleetstate.PermissionRequest, now time.Time) string {
	if len(ps) == 0 {
		return "no permission requests waiting\n"
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMEMBER\tTOOL\tINPUT\tCWD\tAGE")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(p.ID), clean(p.Member), clean(p.Tool),
			clean(agent.MainInput(p.Tool, p.Input)), clean(p.Cwd), age(now.Sub(p.Asked)))
	}
	tw.Flush()
	return b.String()
}
