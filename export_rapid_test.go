package fleetstate

import "sort"

// PeekedTicket is a ticket as [PeekTickets] finds it.
type PeekedTicket struct {
	Outcome        // what Poll returns for it
	Brief   string // the message's content
	Waited  bool   // a call of the lead is blocked on the turn: PollAll leaves it out
	News    bool   // a question or an outcome the lead has not been shown
	Handed  bool   // a call returned the outcome: the lead's next call releases it
}

// PeekTickets returns every ticket of lead, oldest first, as the
// rendezvous holds it, without showing it to the lead (Poll and PollAll
// mark what they return as shown) and without releasing anything: for
// tests that compare the rendezvous with a model after every step.
func PeekTickets(r *Rendezvous, lead string) []PeekedTicket {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ts []*turn
	for _, t := range r.tickets {
		if t.Lead == lead {
			ts = append(ts, t)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Seq < ts[j].Seq })
	out := make([]PeekedTicket, len(ts))
	for i, t := range ts {
		out[i] = PeekedTicket{
			Outcome: t.view(),
			Brief:   t.Brief,
			Waited:  t.waiter != nil,
			News:    !t.seen && (t.State == TicketDone || t.State == TicketQuestion),
			Handed:  t.handed,
		}
	}
	return out
}
