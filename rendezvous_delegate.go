package fleetstate

import "context"

// SendRequest is what a lead asks of [Rendezvous.Delegate]: a new turn for
// member To, or the answer to the question asked in turn TurnID. Exactly
// one of To and TurnID is set.
type SendRequest struct {
	To       string // the member: open a new turn
	TurnID   string // or the turn whose question Content answers
	Content  string // the message, or the answer
	Detached bool   // with To only: return the pending outcome at once
}

// Delegate does what req asks for lead: a new turn as [Rendezvous.Send]
// does ([Rendezvous.SendDetached] when Detached), or an answer as
// [Rendezvous.Answer] does. It is the call of a remote lead, and so it
// returns an outcome or an error, never both:
//
//   - When ctx ends first, it returns ctx.Err() alone. The caller gave up
//     and nothing is lost: the turn goes on, and its outcome stays on its
//     ticket (see Send) for [Rendezvous.PollAll].
//   - When the rendezvous closes during the wait, it returns the pending
//     outcome with its ticket and a nil error: the turn is on disk, and a
//     Rendezvous opened later on the same directory answers for the
//     ticket.
//
// A request that sets both To and TurnID, or neither, or Detached with
// TurnID, is [ErrInvalidArgument].
func (r *Rendezvous) Delegate(ctx context.Context, lead string, req SendRequest) (Outcome, error) {
	const op = "send"
	var o Outcome
	var err error
	switch {
	case (req.To == "") == (req.TurnID == ""):
		return Outcome{}, newError(CodeInvalidArgument, op, "give exactly one of to (a new turn) or turn_id (an answer)")
	case req.TurnID != "" && req.Detached:
		return Outcome{}, newError(CodeInvalidArgument, op, "a detached send goes with to, not with turn_id")
	case req.TurnID != "":
		o, err = r.Answer(ctx, lead, req.TurnID, req.Content)
	case req.Detached:
		return r.SendDetached(lead, req.To, req.Content)
	default:
		o, err = r.Send(ctx, lead, req.To, req.Content)
	}
	switch {
	case err == nil:
		return o, nil
	case o.Kind != "" && CodeOf(err) == CodeClosed:
		return o, nil
	default:
		return Outcome{}, err
	}
}
