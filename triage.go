package fleetstate

import (
	"strings"
	"unicode"
)

// classify names what a turn that ended without a reply left in the pane:
//
//   - backend_exhausted when the tail matches one of the exhausted
//     patterns: the member could not work at all;
//   - echoed_brief when the tail is essentially the brief the lead sent:
//     the member never started, and the brief must not pass for its report;
//   - turn_done otherwise, with the tail as a hint, marked partial when the
//     report was longer than the scrape window.
func (r *Rendezvous) classify(brief, tail string, clipped bool) Outcome {
	for _, re := range r.exhaust {
		if re.MatchString(tail) {
			return Outcome{Kind: OutcomeFailed, Reason: ReasonBackendExhausted, Content: tail}
		}
	}
	if echoesBrief(brief, tail) {
		return Outcome{Kind: OutcomeFailed, Reason: ReasonEchoedBrief,
			Content: "the pane shows only the brief that was sent: the member never started"}
	}
	return Outcome{Kind: OutcomeTurnDone, Content: tail, Partial: clipped}
}

// echoThreshold is the share of a tail's text that must come from the brief
// for the tail to count as the brief echoed back.
const echoThreshold = 0.9

// echoesBrief reports whether tail is essentially brief: at least
// echoThreshold of the tail's characters sit on lines that are part of the
// brief, once prompt marks, box drawing and runs of spaces are dropped. A
// terminal wraps long lines, so a tail line that is any piece of the brief
// counts.
func echoesBrief(brief, tail string) bool {
	nb := normalizeLine(brief)
	if len(nb) == 0 {
		return false
	}
	total, fromBrief := 0, 0
	for line := range strings.SplitSeq(tail, "\n") {
		nl := normalizeLine(line)
		if nl == "" {
			continue
		}
		total += len(nl)
		if strings.Contains(nb, nl) {
			fromBrief += len(nl)
		}
	}
	return total > 0 && float64(fromBrief) >= echoThreshold*float64(total)
}

// normalizeLine drops what a terminal adds around text (prompt marks, box
// drawing, cursor blocks) and collapses white space, so that text compares
// as text.
func normalizeLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case r == '>' || r == '❯' || r == '›' || r == '$' || r == '█' || r == '▌' ||
			(r >= 0x2500 && r <= 0x257F): // box drawing
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
