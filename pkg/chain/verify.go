package chain

import (
	"strconv"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Verifier checks one tenant's events in seq order, one at a time, so a
// caller can page through a large tenant in bounded memory and resume from a
// checkpoint.
type Verifier struct {
	tenant   string
	lastSeq  int64
	lastHash string
	verified int64
}

// NewVerifier starts at the tenant's genesis.
func NewVerifier(tenant string) *Verifier {
	return &Verifier{tenant: tenant, lastHash: Genesis(tenant)}
}

// Resume starts after an already-verified event (a checkpoint): seq and hash
// are that event's. The events before it are trusted; a full walk
// (NewVerifier) re-checks them.
func Resume(tenant string, seq int64, hash string) *Verifier {
	if seq == 0 {
		return NewVerifier(tenant)
	}
	return &Verifier{tenant: tenant, lastSeq: seq, lastHash: hash}
}

// LastSeq is the seq of the last event that verified (0 before any).
func (v *Verifier) LastSeq() int64 { return v.lastSeq }

// LastHash is the hash of the last event that verified (the genesis before any).
func (v *Verifier) LastHash() string { return v.lastHash }

// Verified counts the events this Verifier checked.
func (v *Verifier) Verified() int64 { return v.verified }

// Next checks e against the chain so far. After a *BreakError the Verifier
// is unchanged, so the caller can report and stop.
func (v *Verifier) Next(e *envelope.Envelope) error {
	want := v.lastSeq + 1
	brk := func(seq int64, r Reason, expected, got string) error {
		return &BreakError{Tenant: v.tenant, Seq: seq, Reason: r, Expected: expected, Got: got}
	}
	if e.TenantID != v.tenant {
		return brk(e.Seq, ReasonWrongTenant, strconv.Quote(v.tenant), strconv.Quote(e.TenantID))
	}
	switch {
	case e.Seq == v.lastSeq && v.lastSeq > 0:
		return brk(e.Seq, ReasonDuplicateSeq, "seq "+itoa(want), "seq "+itoa(e.Seq))
	case e.Seq < want:
		return brk(e.Seq, ReasonOutOfOrder, "seq "+itoa(want), "seq "+itoa(e.Seq))
	case e.Seq > want:
		return brk(want, ReasonMissingSeq, "seq "+itoa(want), "seq "+itoa(e.Seq))
	}
	if err := e.ValidateStored(); err != nil {
		return brk(e.Seq, ReasonMalformed, "a valid stored event", err.Error())
	}
	if e.PrevHash != v.lastHash {
		return brk(e.Seq, ReasonPrevMismatch, v.lastHash, e.PrevHash)
	}
	h, err := Hash(e)
	if err != nil {
		return brk(e.Seq, ReasonMalformed, "canonical bytes", err.Error())
	}
	if h != e.Hash {
		return brk(e.Seq, ReasonHashMismatch, h, e.Hash)
	}
	v.lastSeq, v.lastHash = e.Seq, e.Hash
	v.verified++
	return nil
}

// Head checks the head row against the last verified event. A nil head is
// only right for a tenant with no events.
func (v *Verifier) Head(h *Head) error {
	brk := func(expected, got string) error {
		seq := v.lastSeq
		if h != nil && h.LastSeq > v.lastSeq {
			seq = v.lastSeq + 1 // a truncated tail breaks at the first missing event
		}
		return &BreakError{Tenant: v.tenant, Seq: seq, Reason: ReasonHeadMismatch, Expected: expected, Got: got}
	}
	if h == nil {
		if v.lastSeq == 0 {
			return nil
		}
		return brk("head at seq "+itoa(v.lastSeq), "no head row")
	}
	if h.TenantID != v.tenant {
		return brk("head of tenant "+strconv.Quote(v.tenant), "head of tenant "+strconv.Quote(h.TenantID))
	}
	if h.LastSeq != v.lastSeq {
		return brk("last_seq "+itoa(v.lastSeq), "last_seq "+itoa(h.LastSeq))
	}
	if h.LastHash != v.lastHash {
		return brk("last_hash "+v.lastHash, "last_hash "+h.LastHash)
	}
	return nil
}

// Verify checks a tenant's whole chain from genesis: every event in order and
// then the head. It returns nil or the first *BreakError.
func Verify(tenant string, events []envelope.Envelope, head *Head) error {
	v := NewVerifier(tenant)
	for i := range events {
		if err := v.Next(&events[i]); err != nil {
			return err
		}
	}
	return v.Head(head)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
