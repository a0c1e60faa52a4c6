package fleetwatch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/textsafe"
)

// The sections the selection moves through, in the order tab visits them.
const (
	secMembers = iota
	secTickets
	secQuestions
	secRequests
	numSections
)

var sectionNames = [numSections]string{"members", "tickets", "questions", "requests"}

// mode is what the keys do: move and act, or type or confirm something.
type mode int

const (
	modeBrowse  mode = iota
	modeAnswer       // typing the answer to target's question (a turn ID)
	modeConfirm      // confirming the cancel of ticket target
	modeChoose       // choosing the member to send a task to
	modeBrief        // typing the brief for member target
	modeRequest      // reading permission request target whole
	modeAllow        // reading request target; y allows it
	modeDeny         // reading request target, typing why it is denied
	modeMerge        // confirming the merge of member target's branch
)

// reading reports whether md shows a permission request whole.
func (md mode) reading() bool { return md == modeRequest || md == modeAllow || md == modeDeny }

// ActionDoneMsg says how an action the view started ended.
type ActionDoneMsg struct {
	What string // what was done, for the notice
	Err  error
	turn string // of an answer
}

// WithActions returns the model with the actions its keys take; without
// them the view only watches.
func (m Model) WithActions(a Actions) Model {
	m.actions = a
	m.answering = map[string]context.CancelFunc{}
	return m
}

// count is the number of rows of section s.
func (m Model) count(s int) int {
	switch s {
	case secMembers:
		return len(m.members)
	case secTickets:
		return len(m.shownTickets())
	case secQuestions:
		return len(questions(m.tickets))
	}
	return len(m.requests)
}

// sel is the selected row of section s, within its rows (-1: none). The
// selected permission request is the one of ID m.req, wherever it is in
// the list: a request that leaves the list takes the selection with it.
func (m Model) sel(s int) int {
	if s == secRequests {
		return slices.IndexFunc(m.requests, func(r Request) bool { return r.ID == m.req })
	}
	n := m.count(s)
	if n == 0 {
		return -1
	}
	return min(max(m.cursor[s], 0), n-1)
}

func (m Model) shownTickets() []fleetstate.TicketInfo {
	if len(m.tickets) > maxTicketRows {
		return m.tickets[len(m.tickets)-maxTicketRows:]
	}
	return m.tickets
}

// key handles a key press.
func (m Model) key(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	k := msg.String()
	if k == "ctrl+c" {
		return m, tea.Quit
	}
	switch m.mode {
	case modeAnswer, modeBrief:
		switch k {
		case "esc":
			m.mode, m.input = modeBrowse, ""
		case "enter":
			text := strings.TrimSpace(m.input)
			if text == "" {
				return m, nil
			}
			m.prev, m.mode, m.input = m.mode, modeBrowse, ""
			return m.submit(text)
		case "backspace":
			if r := []rune(m.input); len(r) > 0 {
				m.input = string(r[:len(r)-1])
			}
		default:
			if msg.Text != "" {
				m.input += msg.Text
			}
		}
		return m, nil
	case modeConfirm:
		m.mode = modeBrowse
		if k != "y" {
			m.notice = "cancel of ticket " + shortID(m.target) + " not sent"
			return m, nil
		}
		id := m.target
		m.notice = "cancelling ticket " + shortID(id) + "…"
		return m, m.act("cancelled ticket "+shortID(id), func(ctx context.Context) error { return m.actions.Cancel(ctx, id) })
	case modeMerge:
		m.mode = modeBrowse
		if k != "y" {
			m.notice = "merge of " + m.target + " not sent"
			return m, nil
		}
		return m.merge(m.target)
	case modeRequest, modeAllow, modeDeny:
		return m.readingKey(msg)
	case modeChoose:
		n := len(m.members)
		if n == 0 { // removed while choosing
			m.mode, m.notice = modeBrowse, "no member to send to"
			return m, nil
		}
		switch k {
		case "esc":
			m.mode = modeBrowse
		case "up", "k", "shift+tab":
			m.cursor[secMembers] = (m.sel(secMembers) + n - 1) % n
		case "down", "j", "tab":
			m.cursor[secMembers] = (m.sel(secMembers) + 1) % n
		case "enter":
			m.mode, m.target, m.input = modeBrief, m.members[m.sel(secMembers)].Name, ""
		}
		return m, nil
	}
	switch k {
	case "q":
		return m, tea.Quit
	case "esc":
		m.notice = "" // every prompt's esc leaves it; here there is none to leave
	case "up", "k", "down", "j":
		if m.section == secRequests {
			m.selectRequest(k == "down" || k == "j")
			break
		}
		if k == "up" || k == "k" {
			m.cursor[m.section] = max(m.sel(m.section)-1, 0)
			break
		}
		m.cursor[m.section] = max(m.sel(m.section)+1, 0)
		if n := m.count(m.section); m.cursor[m.section] >= n {
			m.cursor[m.section] = max(n-1, 0)
		}
	case "tab", "shift+tab":
		step := 1
		if k == "shift+tab" {
			step = numSections - 1
		}
		m.section = (m.section + step) % numSections
		if m.section == secRequests && m.req == "" && len(m.requests) > 0 {
			m.req = m.requests[0].ID
		}
	case "enter", "v":
		if m.section == secRequests {
			return m.read(modeRequest)
		}
	case "a", "c", "s", "y", "n", "m", "w":
		if m.actions == nil {
			m.notice = "this view only watches"
			return m, nil
		}
		return m.begin(k)
	}
	return m, nil
}

// begin starts the action of key k on the selection.
func (m Model) begin(k string) (tea.Model, tea.Cmd) {
	switch k {
	case "a":
		qs := questions(m.tickets)
		if len(qs) == 0 {
			m.notice = "no question waits for an answer"
			return m, nil
		}
		q := qs[max(m.sel(secQuestions), 0)]
		if m.section == secTickets {
			if t := m.shownTickets()[max(m.sel(secTickets), 0)]; t.State == fleetstate.TicketQuestion {
				q = t
			}
		}
		m.mode, m.target, m.input, m.about = modeAnswer, q.TurnID, "", q.From
	case "c":
		i := m.sel(secTickets)
		if m.section != secTickets || i < 0 {
			m.notice = "select a ticket first (tab to TICKETS)"
			return m, nil
		}
		t := m.shownTickets()[i]
		if t.State == fleetstate.TicketDone {
			m.notice = "ticket " + shortID(t.Ticket) + " has ended already"
			return m, nil
		}
		m.mode, m.target, m.about = modeConfirm, t.Ticket, t.From
	case "s":
		if len(m.members) == 0 {
			m.notice = "no member to send to"
			return m, nil
		}
		m.mode = modeChoose
	case "y":
		return m.read(modeAllow)
	case "n":
		return m.read(modeDeny)
	case "m":
		return m.beginMerge()
	case "w":
		name := m.selected()
		if m.worktrees() == nil || name == "" {
			m.notice = "no work tree to read"
			return m, nil
		}
		m.notice = "reading the work tree of " + name + "…"
		return m, m.readWork(name, true)
	}
	return m, nil
}

// selectRequest moves the selection of the permission requests down or
// up by one; with none selected, it selects the first.
func (m *Model) selectRequest(down bool) {
	n := len(m.requests)
	if n == 0 {
		return
	}
	i := m.sel(secRequests)
	switch {
	case i < 0:
		i = 0
	case down:
		i = min(i+1, n-1)
	default:
		i = max(i-1, 0)
	}
	m.req = m.requests[i].ID
}

// read shows the selected permission request whole, in mode md: to read
// it (modeRequest), to allow it after y (modeAllow), or to deny it with
// the message typed (modeDeny). Deciding needs a selection made by the
// person: the request the selection named, never the one now in its
// place.
func (m Model) read(md mode) (tea.Model, tea.Cmd) {
	i := m.sel(secRequests)
	if m.section != secRequests || i < 0 {
		m.notice = "select a permission request first (tab to REQUESTS, ↑↓ to choose)"
		return m, nil
	}
	if _, ok := m.actions.(Decider); md != modeRequest && !ok {
		m.notice = "permission requests cannot be decided from this view yet"
		return m, nil
	}
	m.mode, m.target, m.scroll, m.input = md, m.requests[i].ID, 0, ""
	return m, nil
}

// readingKey handles a key while a permission request is shown whole.
func (m Model) readingKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	k := msg.String()
	r := m.request(m.target)
	if r == nil { // gone: dropRequest ends the mode, this is a safeguard
		m.mode = modeBrowse
		return m, nil
	}
	switch k {
	case "esc":
		m.leaveReading()
		return m, nil
	case "up":
		m.scroll = max(m.scroll-1, 0)
		return m, nil
	case "down":
		m.scroll++
		return m, nil
	case "pgup":
		m.scroll = max(m.scroll-max(m.height/2, 1), 0)
		return m, nil
	case "pgdown":
		m.scroll += max(m.height/2, 1)
		return m, nil
	}
	d, _ := m.actions.(Decider)
	switch m.mode {
	case modeRequest:
		switch k {
		case "q", "v", "enter":
			m.mode = modeBrowse
		case "k":
			m.scroll = max(m.scroll-1, 0)
		case "j":
			m.scroll++
		case "y", "n":
			md := map[string]mode{"y": modeAllow, "n": modeDeny}[k]
			if d == nil {
				m.notice = "permission requests cannot be decided from this view yet"
				m.mode = modeBrowse
				return m, nil
			}
			m.mode, m.input = md, ""
		}
	case modeAllow:
		switch k {
		case "k":
			m.scroll = max(m.scroll-1, 0)
		case "j":
			m.scroll++
		case "y":
			m.mode = modeBrowse
			return m, m.decide(d, *r, true, "")
		case "n", "q":
			m.leaveReading()
		}
	case modeDeny:
		switch k {
		case "enter":
			m.mode = modeBrowse
			text := strings.TrimSpace(m.input)
			m.input = ""
			return m, m.decide(d, *r, false, text)
		case "backspace":
			if rs := []rune(m.input); len(rs) > 0 {
				m.input = string(rs[:len(rs)-1])
			}
		default:
			m.input += msg.Text
		}
	}
	return m, nil
}

// leaveReading goes back to the lists, saying that a decision begun was
// not sent.
func (m *Model) leaveReading() {
	switch m.mode {
	case modeAllow:
		m.notice = "allow of " + shortID(m.target) + " not sent"
	case modeDeny:
		m.notice = "deny of " + shortID(m.target) + " not sent"
	}
	m.mode, m.input = modeBrowse, ""
}

// decide sends the decision on request r, by its ID.
func (m *Model) decide(d Decider, r Request, allow bool, message string) tea.Cmd {
	done, doing := "denied ", "denying "
	if allow {
		done, doing = "allowed ", "allowing "
	}
	of := shortID(r.ID) + " (" + textsafe.Clip(r.Tool, 40) + " of " + r.Member + ")"
	m.notice = doing + of + "…"
	id := r.ID
	return m.act(done+of, func(ctx context.Context) error { return d.Decide(ctx, id, allow, message) })
}

// request returns the pending request id, or nil.
func (m Model) request(id string) *Request {
	for i := range m.requests {
		if m.requests[i].ID == id {
			return &m.requests[i]
		}
	}
	return nil
}

// dropRequest notes that request id left the list, for why: a selection
// of it ends, and so does the reading of it, with a notice that names it,
// so that no key acts on another request in its place.
func (m *Model) dropRequest(id, why string) {
	reading := m.mode.reading() && m.target == id
	if m.req != id && !reading {
		return
	}
	m.req = ""
	m.notice = "request " + shortID(id) + " " + why + "; nothing is selected"
	if reading {
		if m.mode != modeRequest {
			m.notice += "; your decision was not sent"
		}
		m.mode, m.input = modeBrowse, ""
	}
}

// submit sends the text typed in mode m.prev, which enter has just left.
func (m Model) submit(text string) (tea.Model, tea.Cmd) {
	switch m.prev {
	case modeAnswer:
		turn := m.target
		ctx, cancel := context.WithTimeout(context.Background(), actionTimeout)
		m.answering[turn] = cancel
		m.notice = "answering " + m.about + "…"
		return m, func() tea.Msg {
			defer cancel()
			err := m.actions.Answer(ctx, turn, text)
			if ctx.Err() == context.Canceled {
				err = nil // the stream showed the answer: done
			}
			return ActionDoneMsg{What: "answered " + m.about, Err: err, turn: turn}
		}
	case modeBrief:
		member := m.target
		m.notice = "sending to " + member + "…"
		return m, func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), actionTimeout)
			defer cancel()
			ticket, err := m.actions.Send(ctx, member, text)
			return ActionDoneMsg{What: "sent ticket " + shortID(ticket) + " to " + member, Err: err}
		}
	}
	return m, nil
}

// paste adds pasted text to the text being typed, on one line.
func (m Model) paste(text string) Model {
	if m.mode == modeAnswer || m.mode == modeBrief || m.mode == modeDeny {
		m.input += strings.Join(strings.Fields(text), " ")
	}
	return m
}

// act runs f as a command, bounded, and reports how it ended.
func (m Model) act(what string, f func(context.Context) error) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), actionTimeout)
		defer cancel()
		return ActionDoneMsg{What: what, Err: f(ctx)}
	}
}

// footer is the bottom of the view: the prompt of a mode, or the notice
// of the last action and the keys.
func (m Model) footer() []string {
	var out []string
	switch m.mode {
	case modeAnswer:
		out = append(out, titleStyle.Render("answer "+m.about+": ")+m.input+"█", dimStyle.Render("enter sends · esc leaves"))
	case modeBrief:
		out = append(out, titleStyle.Render("brief for "+m.target+": ")+m.input+"█", dimStyle.Render("enter sends it detached · esc leaves"))
	case modeConfirm:
		out = append(out, warnStyle.Render(fmt.Sprintf("cancel ticket %s of %s? y/n", shortID(m.target), m.about)))
	case modeMerge:
		out = append(out, warnStyle.Render(m.mergePrompt()))
	case modeRequest:
		keys := "↑↓ scroll · esc/enter back"
		if _, ok := m.actions.(Decider); ok {
			keys = "y allow · n deny · " + keys
		}
		out = append(out, dimStyle.Render(keys))
	case modeAllow:
		out = append(out, warnStyle.Render("allow request "+shortID(m.target)+", as shown above? y allows · esc/n leaves"), dimStyle.Render("↑↓ scroll"))
	case modeDeny:
		out = append(out, titleStyle.Render("deny "+shortID(m.target)+"; why (optional, for the agent): ")+m.input+"█",
			dimStyle.Render("enter denies · esc leaves · ↑↓ scroll"))
	case modeChoose:
		name := "(no member)"
		if i := m.sel(secMembers); i >= 0 {
			name = m.members[i].Name
		}
		out = append(out, titleStyle.Render("send to: ")+name, dimStyle.Render("↑↓ choose · enter types the brief · esc leaves"))
	default:
		if m.notice != "" {
			out = append(out, m.notice)
		}
		keys := "↑↓/jk move · tab section (" + sectionNames[m.section] + ") · a answer · c cancel · s send · enter/v read request · y/n allow/deny"
		if m.worktrees() != nil {
			keys += " · m merge · w work"
		}
		out = append(out, dimStyle.Render(keys+" · q quit"))
	}
	return out
}

// noticeOf is the notice of an action that ended.
func noticeOf(d ActionDoneMsg, at time.Time) string {
	if d.Err != nil {
		return errStyle.Render(clock(at) + " failed: " + d.Err.Error())
	}
	return okStyle.Render(clock(at) + " " + d.What)
}
