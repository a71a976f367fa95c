package eventstore

import (
	"context"
	"fmt"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Outcome is what Settle learnt about one emit.
type Outcome int

const (
	// OutcomeUnknown: the event is not at its seq and the head has not moved
	// past the seq before it, so a copy of its request could still commit.
	OutcomeUnknown Outcome = iota
	// OutcomeCommitted: the event is in the log at its seq.
	OutcomeCommitted
	// OutcomeNotCommitted: another event holds the seq. The request was
	// conditioned on the head being just before that seq, and the head never
	// moves back: it can never commit.
	OutcomeNotCommitted
)

func (o Outcome) String() string {
	switch o {
	case OutcomeCommitted:
		return "committed"
	case OutcomeNotCommitted:
		return "not committed"
	}
	return "unknown"
}

// Settlement is Settle's answer.
type Settlement struct {
	Outcome Outcome
	Event   envelope.Envelope // OutcomeCommitted: the committed event
	Holder  string            // OutcomeNotCommitted: the id of the event at the seq
}

// Settle says whether the event eventID, sealed at seq for tenant, committed.
// It is the answer to an *OutcomeUnknownError, which carries the three:
//
//	var ou *eventstore.OutcomeUnknownError
//	if errors.As(err, &ou) {
//		st, err := store.Settle(ctx, ou.Tenant, ou.EventID, ou.Seq)
//		switch {
//		case err != nil: // could not read: try again later
//		case st.Outcome == eventstore.OutcomeCommitted: // done: st.Event is the event
//		case st.Outcome == eventstore.OutcomeNotCommitted: // nothing written: emit again
//		default: // still open: Settle again later (the tenant's next commit decides it)
//		}
//	}
//
// An event can only ever be at the seq it was last sealed at (Emit re-seals
// only after a definite "not committed"), so one read of that seq answers,
// with the head read when the seq is empty. The tenant, event id and seq can
// be kept and settled later, from another process. An emit that carried the
// caller's own conditional write, or an IdempotencyKey, may simply be retried
// instead: the retry cannot apply twice.
func (s *Store) Settle(ctx context.Context, tenant, eventID string, seq int64) (Settlement, error) {
	if seq < 1 {
		return Settlement{}, fmt.Errorf("settle event %s of tenant %q: seq %d is not an event seq", eventID, tenant, seq)
	}
	e, err := s.eventAt(ctx, tenant, seq)
	if err != nil {
		return Settlement{}, fmt.Errorf("settle event %s: %w", eventID, err)
	}
	if e != nil {
		if e.ID == eventID {
			return Settlement{Outcome: OutcomeCommitted, Event: *e}, nil
		}
		return Settlement{Outcome: OutcomeNotCommitted, Holder: e.ID}, nil
	}
	head, err := s.Head(ctx, tenant)
	if err != nil {
		return Settlement{}, fmt.Errorf("settle event %s: %w", eventID, err)
	}
	if head != nil && head.LastSeq >= seq {
		return Settlement{}, fmt.Errorf("settle event %s of tenant %q: the head is at seq %d but seq %d has no row; run reconcile: %w",
			eventID, tenant, head.LastSeq, seq, ErrLogAhead)
	}
	return Settlement{Outcome: OutcomeUnknown}, nil
}
