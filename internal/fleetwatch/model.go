// Package fleetwatch is the terminal view of `fleetstate watch`: a
// bubbletea model of the fleet, fed by the daemon's event stream.
//
// The model follows the Elm architecture. Its state changes only in
// Update, from messages: a [SnapshotMsg] replaces the whole picture, each
// [EventMsg] changes it by one event, [GapMsg] and [DownMsg] tell what
// became of the connection, and a tick once a second moves the clock that
// the open turns' ages are counted on. View is a function of the state
// alone. Nothing in the model reads the disk or the network: [Stream] does
// that, and hands what it reads to the model as messages on a channel.
package fleetwatch

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/agent"
	"github.com/fleetstate/fleetstate/internal/textsafe"
	"github.com/fleetstate/fleetstate/internal/usage"
)

// Bounds of what the view keeps and shows.
const (
	// MaxEvents is how many of the last events the model keeps: a bounded
	// list, however long the view runs.
	MaxEvents = 100
	// maxTicketRows is how many tickets the view lists before it says
	// how many more there are.
	maxTicketRows = 12
	// maxContent is how many characters of a brief, question, answer or
	// reply a line shows.
	maxContent = 60
	// maxTool is how many characters of a tool's name, or of who decided,
	// a line shows.
	maxTool = 40
	// tickEvery is the period of the clock that ages the open turns. It
	// moves the display only: it reads nothing.
	tickEvery = time.Second
)

// SnapshotMsg carries the fleet's state as a new connection found it,
// and the events that came just before it, oldest first.
type SnapshotMsg struct {
	URL      string // the daemon's base URL
	Snapshot fleetstate.Snapshot
	Recent   []fleetstate.Event
	Requests []Request // the pending permission requests, if the daemon has them
}

// EventMsg carries one event of the stream.
type EventMsg struct{ Event fleetstate.Event }

// GapMsg says that the stream lost Missed events because the view read
// too slowly; the stream reconnects to get a fresh snapshot.
type GapMsg struct {
	Missed uint64
	Time   time.Time
}

// DownMsg says that the connection to the daemon failed or ended, and
// when the stream tries again.
type DownMsg struct {
	Err   error
	Retry time.Duration
}

// TickMsg moves the model's clock.
type TickMsg time.Time

// streamEndedMsg says that the stream's channel closed: it will send no
// more.
type streamEndedMsg struct{}

// connState is what the model knows of its connection.
type connState int

const (
	connecting connState = iota
	live
	down
)

// eventLine is an event as the view lists it.
type eventLine struct {
	time time.Time
	kind string
	who  string
	text string
}

// Model is the state of the view. Make one with [New]; its methods are not
// safe for concurrent use (bubbletea calls them from one goroutine).
type Model struct {
	msgs   <-chan tea.Msg // where the stream's messages come from; nil for none
	url    string
	now    time.Time
	width  int // 0: unknown, no clipping
	height int

	conn    connState
	connErr string
	retry   time.Duration
	gap     string // the last gap's notice, empty if none yet

	downSince time.Time // when the stream went, while conn is down

	seq      uint64 // of the last event applied
	members  []fleetstate.MemberInfo
	tickets  []fleetstate.TicketInfo // oldest first
	requests []Request               // nil: the snapshot carries none
	events   []eventLine             // the last MaxEvents, oldest first

	// Acting: nil actions means the view only watches.
	actions   Actions
	answering map[string]context.CancelFunc // by turn: answers under way, ended when the stream shows them
	section   int                           // the section the selection is in
	cursor    [numSections]int              // the selected row of each section
	req       string                        // the ID of the selected permission request; "" for none
	scroll    int                           // the first line shown of the request being read
	mode      mode
	prev      mode   // the mode enter just left
	input     string // what was typed in modeAnswer or modeBrief
	target    string // the turn, ticket or member of the mode
	about     string // the member the mode is about, for its prompt
	notice    string // how the last action went

	// Work trees, read with the actions' [Worktrees].
	work      map[string]work // by member
	workAsked uint64          // the number of the last reading asked for
	following string          // the member whose work tree was last read on its selection
}

// New returns the model of a view of the daemon at url (for the header),
// whose clock reads now, fed by the messages on msgs (which may be nil).
func New(url string, now time.Time, msgs <-chan tea.Msg) Model {
	return Model{url: url, now: now, msgs: msgs, work: map[string]work{}}
}

// Init starts the clock and the reading of the stream's messages.
func (m Model) Init() tea.Cmd {
	return tea.Batch(tick(), m.listen())
}

func tick() tea.Cmd {
	return tea.Tick(tickEvery, func(t time.Time) tea.Msg { return TickMsg(t) })
}

// listen returns the command that waits for the stream's next message.
// Update issues it again after each one, so exactly one waits at a time.
func (m Model) listen() tea.Cmd {
	if m.msgs == nil {
		return nil
	}
	ch := m.msgs
	return func() tea.Msg {
		msg, ok := <-ch
		if !ok {
			return streamEndedMsg{}
		}
		return msg
	}
}

// Update applies msg to the model, and reads the work tree of a member
// newly selected.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	next, cmd := m.update(msg)
	return next.(Model).follow(cmd)
}

// update is Update but for the reading of a member newly selected.
func (m Model) update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		return m.key(msg)
	case tea.PasteMsg:
		return m.paste(msg.Content), nil
	case ActionDoneMsg:
		m.notice = noticeOf(msg, m.now)
		delete(m.answering, msg.turn)
		return m, nil
	case changesMsg:
		m.applyChanges(msg)
		return m, nil
	case mergeDoneMsg:
		return m, m.mergeDone(msg)
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case TickMsg:
		m.now = time.Time(msg)
		return m, tick()
	case SnapshotMsg:
		m.applySnapshot(msg)
		return m, m.listen()
	case EventMsg:
		return m, tea.Batch(m.apply(msg.Event), m.listen())
	case GapMsg:
		m.gap = fmt.Sprintf("missed %d events at %s: re-synced from a fresh snapshot", msg.Missed, clock(msg.Time))
		m.conn = connecting
		m.addLine(eventLine{time: msg.Time, kind: "gap", text: fmt.Sprintf("missed %d events; reconnecting for a fresh snapshot", msg.Missed)})
		return m, m.listen()
	case DownMsg:
		if m.conn != down {
			m.downSince = m.now
		}
		m.conn, m.retry = down, msg.Retry
		m.connErr = ""
		if msg.Err != nil {
			m.connErr = msg.Err.Error()
		}
		return m, m.listen()
	case streamEndedMsg:
		return m, nil
	}
	return m, nil
}

func (m *Model) applySnapshot(msg SnapshotMsg) {
	s := msg.Snapshot
	// The recent events this view has not listed yet: all of them from a
	// daemon that started afresh (its count is behind this view's),
	// else those after the last event applied.
	for _, e := range msg.Recent {
		if (s.Seq < m.seq || e.Seq > m.seq) && listed(e) {
			m.addLine(describe(e))
		}
	}
	m.url, m.conn, m.connErr, m.seq = msg.URL, live, "", s.Seq
	m.members = append([]fleetstate.MemberInfo(nil), s.Members...)
	sort.Slice(m.members, func(i, j int) bool { return m.members[i].Name < m.members[j].Name })
	m.tickets = append([]fleetstate.TicketInfo(nil), s.Tickets...)
	m.requests = msg.Requests
	// The daemon may be another, of another fleet file: the selected
	// member's work tree is read again, and so is that of a member that
	// had none.
	m.following = ""
	for name, w := range m.work {
		if w.none {
			delete(m.work, name)
		}
	}
	for _, id := range []string{m.req, m.target} {
		if id != "" && m.request(id) == nil {
			m.dropRequest(id, "is no longer pending")
		}
	}
}

// apply changes the model by one event, as the rendezvous changed by it,
// and returns the reading of a work tree it calls for.
func (m *Model) apply(e fleetstate.Event) tea.Cmd {
	if e.Seq != 0 && e.Seq <= m.seq {
		return nil // the snapshot has it already
	}
	m.seq = e.Seq
	if listed(e) {
		m.addLine(describe(e))
	}
	if cancel, ok := m.answering[e.TurnID]; ok && e.Kind == fleetstate.EventAnswered {
		cancel() // the answer is in: the turn's outcome stays on its ticket
		delete(m.answering, e.TurnID)
	}
	mem := m.member(e.Member)
	tk := m.ticket(e.Ticket)
	// leaveQueue counts a ticket leaving its member's FIFO.
	leaveQueue := func() {
		if tk != nil && tk.State == fleetstate.TicketQueued && mem != nil && mem.Queued > 0 {
			mem.Queued--
		}
	}
	switch e.Kind {
	case fleetstate.EventPermissionRequested:
		if p := e.Permission; p != nil && !slices.ContainsFunc(m.requests, func(r Request) bool { return r.ID == p.ID }) {
			m.requests = append(m.requests, *p)
		}
	case fleetstate.EventPermissionDecided, fleetstate.EventPermissionExpired:
		if p := e.Permission; p != nil {
			m.requests = slices.DeleteFunc(m.requests, func(r Request) bool { return r.ID == p.ID })
			m.dropRequest(p.ID, permissionEnd(e))
		}
	case fleetstate.EventMemberAdded:
		if mem == nil {
			m.members = append(m.members, fleetstate.MemberInfo{Name: e.Member})
			sort.Slice(m.members, func(i, j int) bool { return m.members[i].Name < m.members[j].Name })
		}
	case fleetstate.EventMemberRemoved:
		for i := range m.members {
			if m.members[i].Name == e.Member {
				m.members = append(m.members[:i], m.members[i+1:]...)
				break
			}
		}
		delete(m.work, e.Member)
	case fleetstate.EventReady, fleetstate.EventGone:
		if mem != nil {
			mem.Ready = e.Kind == fleetstate.EventReady
		}
	case fleetstate.EventStatus:
		if mem != nil {
			mem.Status = e.Status
		}
	case fleetstate.EventUsage:
		if mem != nil && e.Usage != nil {
			mem.Usage, mem.Cost, mem.Unpriced = *e.Usage, e.Cost, e.Unpriced
		}
	case fleetstate.EventBudgetSet, fleetstate.EventBudgetWarning, fleetstate.EventBudgetExhausted:
		if mem != nil {
			mem.Budget = e.Budget
		}
	case fleetstate.EventQueued:
		if tk == nil {
			m.tickets = append(m.tickets, fleetstate.TicketInfo{Lead: e.Lead, Brief: e.Content, Created: e.Time,
				Outcome: fleetstate.Outcome{Kind: fleetstate.OutcomePending, TurnID: e.TurnID, Ticket: e.Ticket, From: e.Member, State: fleetstate.TicketQueued}})
			if mem != nil {
				mem.Queued++
			}
		}
	case fleetstate.EventDelivered:
		leaveQueue()
		if tk != nil {
			tk.State = fleetstate.TicketWorking
		}
		if mem != nil {
			mem.OpenTurn, mem.OpenSince = e.TurnID, e.Time
		}
	case fleetstate.EventAsked:
		if tk != nil {
			tk.State, tk.Kind, tk.Content = fleetstate.TicketQuestion, fleetstate.OutcomeQuestion, e.Content
		}
	case fleetstate.EventAnswered, fleetstate.EventWithdrawn:
		if tk != nil {
			tk.State, tk.Kind, tk.Content = fleetstate.TicketWorking, fleetstate.OutcomePending, ""
		}
	case fleetstate.EventOutcome:
		leaveQueue()
		if tk != nil && e.Outcome != nil {
			tk.Outcome = *e.Outcome
			tk.Ticket, tk.TurnID, tk.From, tk.State = e.Ticket, e.TurnID, e.Member, fleetstate.TicketDone
		}
		if mem != nil && mem.OpenTurn == e.TurnID {
			mem.OpenTurn, mem.OpenSince = "", time.Time{}
		}
	case fleetstate.EventAcked:
		for i := range m.tickets {
			if m.tickets[i].Ticket == e.Ticket {
				m.tickets = append(m.tickets[:i], m.tickets[i+1:]...)
				break
			}
		}
	}
	return m.refreshWork(e)
}

func (m *Model) member(name string) *fleetstate.MemberInfo {
	return find(m.members, name, func(mi *fleetstate.MemberInfo) string { return mi.Name })
}

func (m *Model) ticket(id string) *fleetstate.TicketInfo {
	return find(m.tickets, id, func(t *fleetstate.TicketInfo) string { return t.Ticket })
}

// find returns the element of xs whose key is k, nil if none is or k is
// empty.
func find[T any](xs []T, k string, key func(*T) string) *T {
	if k == "" {
		return nil
	}
	for i := range xs {
		if key(&xs[i]) == k {
			return &xs[i]
		}
	}
	return nil
}

func (m *Model) addLine(l eventLine) {
	m.events = append(m.events, l)
	if n := len(m.events) - MaxEvents; n > 0 {
		m.events = append(m.events[:0:0], m.events[n:]...)
	}
}

// used tells a member's usage in a few characters: its input and output
// tokens, "-" before any, its cost at the fleet's prices, if it has
// prices, and its budget's share spent, if it has one.
func used(mi fleetstate.MemberInfo) string {
	u, b := mi.Usage, mi.Budget
	s := "-"
	if !u.IsZero() {
		s = tokens(u.Input) + " in " + tokens(u.Output) + " out"
	}
	if mi.Cost != nil {
		s += " " + usage.FormatCost(*mi.Cost)
		if mi.Unpriced {
			s += "+?"
		}
	}
	switch {
	case b == nil:
	case b.Held:
		s += " (budget spent)"
	default:
		s += fmt.Sprintf(" (%d%% of budget)", int(b.Spent*100/b.Limit()))
	}
	return s
}

// tokens writes n short: 999, 12.3k, 4.5M.
func tokens(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	default:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
}

// budgetText says a budget event: whose budget, its limit, its spend.
func budgetText(e fleetstate.Event) string {
	who := "the fleet's budget"
	if e.Member != "" {
		who = "budget"
	}
	b := e.Budget
	if b == nil {
		return who + " removed"
	}
	spent := tokens(int64(b.Spent))
	if b.Cost > 0 {
		spent = usage.FormatCost(b.Spent)
	}
	s := fmt.Sprintf("%s of %s: %s spent", who, b.Budget.String(), spent)
	if len(b.Unpriced) > 0 {
		s += ", no price for " + textsafe.Clip(strings.Join(b.Unpriced, ", "), 80)
	}
	if b.Held {
		s += ", no new turns"
	}
	return s
}

// listed reports whether e has a line in the event list. A usage event
// has none: a member's usage grows at every tool call, and its row tells
// it.
func listed(e fleetstate.Event) bool { return e.Kind != fleetstate.EventUsage }

// describe turns an event into a line of the event list.
func describe(e fleetstate.Event) eventLine {
	l := eventLine{time: e.Time, kind: string(e.Kind), who: e.Member}
	switch e.Kind {
	case fleetstate.EventQueued:
		l.text = "from " + e.Lead + ": " + quote(e.Content)
	case fleetstate.EventDelivered:
		l.text = "turn opened for " + e.Lead
	case fleetstate.EventStatus:
		l.text = e.Status
	case fleetstate.EventAsked, fleetstate.EventAnswered:
		l.text = quote(e.Content)
	case fleetstate.EventWithdrawn:
		l.text = "question unanswered in time"
	case fleetstate.EventCancelled:
		l.text = "by " + e.Lead
	case fleetstate.EventOutcome:
		if e.Outcome != nil {
			l.text = outcomeText(*e.Outcome)
		}
		if e.Held {
			l.text += " (held on the ticket)"
		}
	case fleetstate.EventAcked:
		l.text = "ticket " + shortID(e.Ticket) + " collected by " + e.Lead
	case fleetstate.EventPermissionRequested, fleetstate.EventPermissionDecided, fleetstate.EventPermissionExpired:
		l.text = permissionText(e)
	case fleetstate.EventMergeRequested, fleetstate.EventMerged, fleetstate.EventMergeRefused:
		l.text = "by " + textsafe.Clip(e.By, maxTool) + ": " + textsafe.Quote(e.Content, maxContent)
	case fleetstate.EventBudgetSet, fleetstate.EventBudgetWarning, fleetstate.EventBudgetExhausted:
		l.text = budgetText(e)
	}
	return l
}

// permissionText says what a permission event is about: what was asked
// (the tool and its main input, clipped and escaped), and for a decided
// or expired request how it ended and by whom.
func permissionText(e fleetstate.Event) string {
	p := e.Permission
	if p == nil {
		return textsafe.Quote(e.Content, maxContent)
	}
	asked := textsafe.Clip(p.Tool, maxTool) + " " + textsafe.Quote(agent.MainInput(p.Tool, p.Input), maxContent)
	if e.Kind == fleetstate.EventPermissionRequested {
		return shortID(p.ID) + " asks " + asked
	}
	return shortID(p.ID) + " " + asked + ": " + permissionEnd(e)
}

// permissionEnd says how a decided or expired request ended, and by
// whom: "allowed by operator", `denied by lead-a: "not there"`, "ended
// undecided (timeout): its window passed undecided".
func permissionEnd(e fleetstate.Event) string {
	by := e.By
	if p := e.Permission; by == "" && p != nil && p.Decision != nil {
		by = p.Decision.By // from a daemon that does not set By
	}
	var s string
	switch {
	case e.Kind == fleetstate.EventPermissionExpired:
		s = "ended undecided"
		if by != "" {
			s += " (" + textsafe.Clip(by, maxTool) + ")"
		}
		if e.Content != "" {
			s += ": " + textsafe.Clip(e.Content, maxContent)
		}
		return s
	case e.Permission != nil && e.Permission.Decision != nil && e.Permission.Decision.Behavior == fleetstate.BehaviorAllow:
		s = "allowed"
	case e.Permission != nil && e.Permission.Decision != nil && e.Permission.Decision.Behavior == fleetstate.BehaviorDeny:
		s = "denied"
	default:
		s = "decided"
	}
	if by != "" {
		s += " by " + textsafe.Clip(by, maxTool)
	}
	if e.Content != "" {
		s += ": " + textsafe.Quote(e.Content, maxContent)
	}
	return s
}

func outcomeText(o fleetstate.Outcome) string {
	switch o.Kind {
	case fleetstate.OutcomeFailed:
		return "failed: " + string(o.Reason)
	case fleetstate.OutcomeReply, fleetstate.OutcomeTurnDone, fleetstate.OutcomeQuestion:
		return string(o.Kind) + ": " + quote(o.Content)
	}
	return string(o.Kind)
}

// quote shows content on one line, clipped, its hidden characters
// escaped (see [textsafe.EscapeText]).
func quote(s string) string {
	s = textsafe.EscapeText(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > maxContent {
		s = string(r[:maxContent-1]) + "…"
	}
	return `"` + s + `"`
}

// fitQuote is [textsafe.Quote] of s in at most room columns, its mark
// included, when that leaves any of s to show.
func fitQuote(s string, room int) string {
	n := room
	q := textsafe.Quote(s, n)
	for w := lipgloss.Width(q); w > room && n > 1; w = lipgloss.Width(q) {
		n = max(n-(w-room), 1)
		q = textsafe.Quote(s, n)
	}
	return q
}

// shortID is a ticket's or turn's ID as a view shows it: the first eight
// hexadecimal digits of its UUID.
func shortID(id string) string {
	if strings.Count(id, "-") >= 5 { // ticket-UUID, turn-UUID
		id = id[strings.IndexByte(id, '-')+1:]
	}
	if len(id) > 8 {
		id = id[:8]
	}
	return id
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "--:--:--"
	}
	return t.Local().Format("15:04:05")
}

// age formats a duration as a view shows an age: 12s, 3m04s, 2h05m.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

var (
	titleStyle   = lipgloss.NewStyle().Bold(true)
	headStyle    = lipgloss.NewStyle().Bold(true).Underline(true)
	dimStyle     = lipgloss.NewStyle().Faint(true)
	warnStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("3")).Bold(true)
	errStyle     = lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true)
	okStyle      = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	workingStyle = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
)

// statusStyle colours a member's status or a ticket's state.
func statusStyle(s string) lipgloss.Style {
	switch strings.ToLower(s) {
	case "blocked", "question", "failed":
		return errStyle
	case "working":
		return workingStyle
	case "idle", "yes", "done":
		return okStyle
	}
	return lipgloss.NewStyle()
}

// View renders the model.
func (m Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.WindowTitle = "fleetstate watch"
	return v
}

// Render is the text of the view, with its styles as ANSI sequences.
func (m Model) Render() string {
	if r := m.request(m.target); m.mode.reading() && r != nil {
		return m.renderRequest(*r)
	}
	var top []string
	top = append(top, m.header()...)

	stale := m.conn == down && len(m.members) > 0
	head := titleStyle.Render(fmt.Sprintf("MEMBERS (%d)", len(m.members)))
	if stale {
		head += "  " + warnStyle.Render("stale: as last seen at "+clock(m.downSince)+", before the daemon went")
	}
	top = append(top, "", head)
	if len(m.members) == 0 {
		top = append(top, dimStyle.Render("  no members"))
	} else {
		rows := [][]string{{"NAME", "READY", "STATUS", "QUEUED", "USED", "TURN"}}
		for _, mi := range m.members {
			ready := "no"
			switch {
			case stale:
				ready = "stale"
			case mi.Ready:
				ready = "yes"
			}
			turn := "-"
			if mi.OpenTurn != "" {
				state := string(fleetstate.TicketWorking)
				for _, t := range m.tickets {
					if t.TurnID == mi.OpenTurn && t.State != "" {
						state = string(t.State)
					}
				}
				turn = state + " " + age(m.now.Sub(mi.OpenSince))
			}
			status := mi.Status
			if status == "" {
				status = "-"
			}
			rows = append(rows, []string{mi.Name, ready, status, fmt.Sprint(mi.Queued), used(mi), turn})
		}
		top = append(top, m.mark(secMembers, table(rows, map[int]bool{1: true, 2: true, 5: true}))...)
	}
	members := len(top)

	top = append(top, "", titleStyle.Render(fmt.Sprintf("TICKETS (%d)", len(m.tickets))))
	if len(m.tickets) == 0 {
		top = append(top, dimStyle.Render("  no tickets"))
	} else {
		rows := [][]string{{"TICKET", "MEMBER", "LEAD", "STATE", "AGE", "BRIEF / OUTCOME"}}
		shown := m.shownTickets()
		for _, t := range shown {
			what := quote(t.Brief)
			switch t.State {
			case fleetstate.TicketQuestion:
				what = "asks " + quote(t.Content)
			case fleetstate.TicketDone:
				what = outcomeText(t.Outcome)
			}
			rows = append(rows, []string{shortID(t.Ticket), t.From, t.Lead, string(t.State), age(m.now.Sub(t.Created)), what})
		}
		top = append(top, m.mark(secTickets, table(rows, map[int]bool{3: true}))...)
		if n := len(m.tickets) - len(shown); n > 0 {
			top = append(top, dimStyle.Render(fmt.Sprintf("  … and %d older", n)))
		}
	}
	if qs := questions(m.tickets); m.actions != nil || len(qs) > 0 {
		top = append(top, "", titleStyle.Render(fmt.Sprintf("QUESTIONS (%d)", len(qs))))
		if len(qs) == 0 {
			top = append(top, dimStyle.Render("  none waiting"))
		} else {
			rows := [][]string{{"MEMBER", "TURN", "LEAD", "QUESTION"}}
			for _, q := range qs {
				rows = append(rows, []string{q.From, shortID(q.TurnID), q.Lead, quote(q.Content)})
			}
			top = append(top, m.mark(secQuestions, table(rows, map[int]bool{}))...)
		}
	}
	if m.requests != nil {
		top = append(top, "", titleStyle.Render(fmt.Sprintf("PERMISSION REQUESTS (%d)", len(m.requests))))
		if len(m.requests) == 0 {
			top = append(top, dimStyle.Render("  none waiting"))
		} else {
			rows := [][]string{{"REQUEST", "MEMBER", "TOOL", "AGE"}}
			for _, r := range m.requests {
				rows = append(rows, []string{shortID(r.ID), r.Member, textsafe.Clip(r.Tool, maxTool), age(m.now.Sub(r.Asked))})
			}
			// The input comes last, clipped to the room left, so that
			// the mark of what it clips stays on the screen.
			room := maxContent + 2
			if m.width > 0 {
				room = min(room, max(m.width-lipgloss.Width(table(rows, nil)[0])-2, 10))
			}
			rows[0] = append(rows[0], "INPUT")
			for i, r := range m.requests {
				rows[i+1] = append(rows[i+1], fitQuote(agent.MainInput(r.Tool, r.Input), room))
			}
			top = append(top, m.mark(secRequests, table(rows, map[int]bool{}))...)
		}
	}

	top = append(top, "", titleStyle.Render("EVENTS"))
	// The events get the lines left over, newest last.
	var foot []string
	if m.actions != nil {
		foot = append([]string{""}, m.footer()...)
	}
	// The selected member's work tree comes under the members, its files
	// as many as leave a few lines of events.
	work := -1
	if m.height > 0 {
		work = max(m.height-len(top)-len(foot)-minEventRows, 0)
	}
	top = slices.Concat(top[:members], m.workSection(work), top[members:])
	room := len(m.events)
	if m.height > 0 {
		room = m.height - len(top) - len(foot)
	}
	var bottom []string
	if len(m.events) == 0 {
		bottom = append(bottom, dimStyle.Render("  none yet"))
	} else if room > 0 {
		evs := m.events
		if len(evs) > room {
			evs = evs[len(evs)-room:]
		}
		rows := make([][]string, 0, len(evs))
		for _, l := range evs {
			rows = append(rows, []string{clock(l.time), l.kind, l.who, l.text})
		}
		bottom = append(bottom, table(rows, nil)...)
	}
	lines := append(top, bottom...)
	if m.height > 0 && len(lines) > m.height-len(foot) {
		lines = lines[:max(m.height-len(foot), 0)]
	}
	lines = append(lines, foot...)
	if m.width > 0 {
		for i, l := range lines {
			lines[i] = ansi.Truncate(l, m.width, "…")
		}
	}
	return strings.Join(lines, "\n")
}

// header is the view's first lines: the daemon, the connection, and the
// last gap.
func (m Model) header() []string {
	header := titleStyle.Render("fleetstate watch") + "  " + m.url + "  "
	switch m.conn {
	case connecting:
		header += warnStyle.Render("connecting…")
	case live:
		header += okStyle.Render("live") + dimStyle.Render(fmt.Sprintf(" · event %d", m.seq))
	case down:
		s := "disconnected"
		if m.connErr != "" {
			s += ": " + m.connErr
		}
		if m.retry > 0 {
			s += fmt.Sprintf("; retrying in %s", m.retry.Round(time.Millisecond))
		}
		header += errStyle.Render(s)
	}
	if m.actions == nil {
		header += "   " + dimStyle.Render("q quits")
	}
	out := []string{header}
	if m.gap != "" {
		out = append(out, warnStyle.Render("⚠ "+m.gap))
	}
	return out
}

// renderRequest is the view of one permission request, whole: who asks,
// for which tool, where, and its input escaped (see [textsafe.Escape]),
// wrapped to the width and scrolled to m.scroll, above the prompt of the
// decision under way.
func (m Model) renderRequest(r Request) string {
	width := m.width
	if width <= 0 {
		width = 100
	}
	wrap := func(s string) []string {
		var out []string
		for _, l := range strings.Split(ansi.Hardwrap(s, max(width-2, 10), true), "\n") {
			out = append(out, "  "+l)
		}
		return out
	}
	top := m.header()
	top = append(top, "", titleStyle.Render("PERMISSION REQUEST "+r.ID))
	ends := ""
	if !r.Deadline.IsZero() {
		ends = ", ends undecided in " + age(r.Deadline.Sub(m.now))
	}
	top = append(top, table([][]string{
		{"member", r.Member},
		{"tool", textsafe.Escape(r.Tool)},
		{"cwd", textsafe.Escape(r.Cwd)},
		{"asked", clock(r.Asked) + " (" + age(m.now.Sub(r.Asked)) + " ago" + ends + ")"},
	}, nil)...)
	var body []string
	main := agent.MainInput(r.Tool, r.Input)
	head := "INPUT"
	if main != r.Input {
		head = "MAIN INPUT"
	}
	body = append(body, "", titleStyle.Render(head)+dimStyle.Render(fmt.Sprintf(" (%d characters escaped: \\n is a line break, \\u202e an invisible character, \\\\ a backslash)", len([]rune(textsafe.Escape(main))))))
	body = append(body, wrap(textsafe.Escape(main))...)
	if main != r.Input {
		body = append(body, "", titleStyle.Render("WHOLE INPUT (JSON, escaped)"))
		body = append(body, wrap(textsafe.Escape(r.Input))...)
	}
	if r.InputBytes > 0 {
		body = append(body, "", warnStyle.Render(fmt.Sprintf("the daemon sent %d of the input's %d bytes: fleetstate requests %s shows it whole", len(r.Input), r.InputBytes, shortID(r.ID))))
	}
	foot := append([]string{""}, m.footer()...)
	room := len(body)
	if m.height > 0 {
		room = max(m.height-len(top)-len(foot)-1, 1)
	}
	scroll := min(m.scroll, max(len(body)-room, 0))
	shown := body[scroll:min(scroll+room, len(body))]
	lines := append(top, shown...)
	if len(body) > room {
		lines = append(lines, dimStyle.Render(fmt.Sprintf("  lines %d-%d of %d (↑↓ scroll)", scroll+1, scroll+len(shown), len(body))))
	}
	lines = append(lines, foot...)
	if m.width > 0 {
		for i, l := range lines {
			lines[i] = ansi.Truncate(l, m.width, "…")
		}
	}
	return strings.Join(lines, "\n")
}

// mark marks the selected row of section s in its table (heading first)
// when the view acts and the selection is in s.
func (m Model) mark(s int, lines []string) []string {
	if i := m.sel(s) + 1; m.actions != nil && m.section == s && i > 0 && i < len(lines) {
		lines[i] = "▸" + lines[i][1:]
	}
	return lines
}

// table lays rows out in columns, two spaces apart and indented by two.
// With styled non-nil the first row is a heading, and the columns in
// styled are coloured by their value; with styled nil every row is plain.
func table(rows [][]string, styled map[int]bool) []string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], lipgloss.Width(c))
		}
	}
	out := make([]string, 0, len(rows))
	for ri, r := range rows {
		var b strings.Builder
		b.WriteString("  ")
		for i, c := range r {
			pad := ""
			if i < len(r)-1 {
				pad = strings.Repeat(" ", widths[i]-lipgloss.Width(c)+2)
			}
			switch {
			case styled != nil && ri == 0:
				c = headStyle.Render(c)
			case styled[i]:
				c = statusStyle(strings.Fields(c + " x")[0]).Render(c)
			}
			b.WriteString(c + pad)
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}
