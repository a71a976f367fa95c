package chain

import (
	"crypto/sha256"
	"strconv"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Verifier checks one tenant's events in seq order, one at a time, so a
// caller can page through a large tenant in bounded memory and resume from a
// checkpoint.
type Verifier struct {
	tenant   string
	lastSeq  int64
	verified int64

	// The last hash, as hex and as bytes: kept in arrays, so no string is
	// allocated per event, and the next event's prev_hash, once found equal
	// to lastHex, is not decoded again. When bad, lastBad is a checkpoint
	// hash given to Resume that is not 64 lowercase hex digits (no event can
	// then link to it).
	lastHex [2 * sha256.Size]byte
	lastRaw [sha256.Size]byte
	bad     bool
	lastBad string

	d    digester
	line []byte // NextItem's scratch
}

// NewVerifier starts at the tenant's genesis.
func NewVerifier(tenant string) *Verifier {
	v := &Verifier{tenant: tenant}
	v.setLast(Genesis(tenant))
	return v
}

// Resume starts after an already-verified event (a checkpoint): seq and hash
// are that event's. The events before it are trusted; a full walk
// (NewVerifier) re-checks them.
func Resume(tenant string, seq int64, hash string) *Verifier {
	if seq == 0 {
		return NewVerifier(tenant)
	}
	v := &Verifier{tenant: tenant, lastSeq: seq}
	v.setLast(hash)
	return v
}

func (v *Verifier) setLast(hash string) {
	if !decodeHash(hash, &v.lastRaw) {
		v.bad, v.lastBad = true, hash
		return
	}
	copy(v.lastHex[:], hash)
}

// LastSeq is the seq of the last event that verified (0 before any).
func (v *Verifier) LastSeq() int64 { return v.lastSeq }

// LastHash is the hash of the last event that verified (the genesis before any).
func (v *Verifier) LastHash() string {
	if v.bad {
		return v.lastBad
	}
	return string(v.lastHex[:])
}

// isLast reports whether h is the last hash, without allocating.
func isLast[T string | []byte](v *Verifier, h T) bool {
	if v.bad {
		return string(h) == v.lastBad
	}
	return string(h) == string(v.lastHex[:])
}

// Verified counts the events this Verifier checked.
func (v *Verifier) Verified() int64 { return v.verified }

// Next checks e against the chain so far. After a *BreakError the Verifier
// is unchanged, so the caller can report and stop.
func (v *Verifier) Next(e *envelope.Envelope) error {
	if e.TenantID != v.tenant {
		return v.breakAt(e.Seq, ReasonWrongTenant, strconv.Quote(v.tenant), strconv.Quote(e.TenantID))
	}
	if err := v.checkSeq(e.Seq); err != nil {
		return err
	}
	return v.rest(e)
}

// nextRead is Next for an event read from a line of an export
// (envelope.Object.Event), whose seq could be read: SPEC.md §6 steps 2–6,
// with a tenant_id that cannot be read and members that are not well formed
// reported as a malformed event.
func (v *Verifier) nextRead(ev *envelope.ReadEvent) error {
	e := &ev.Envelope
	if !ev.TenantRead {
		return v.breakAt(e.Seq, ReasonMalformed, "a tenant_id, once, a string", "none that can be read")
	}
	if e.TenantID != v.tenant {
		return v.breakAt(e.Seq, ReasonWrongTenant, strconv.Quote(v.tenant), strconv.Quote(e.TenantID))
	}
	if err := v.checkSeq(e.Seq); err != nil {
		return err
	}
	if ev.Malformed != nil {
		return v.breakAt(e.Seq, ReasonMalformed, "a valid stored event", ev.Malformed.Error())
	}
	return v.rest(e)
}

// rest is SPEC.md §6 steps 3–6 for a decoded event.
func (v *Verifier) rest(e *envelope.Envelope) error {
	if err := e.ValidateStored(); err != nil {
		return malformedEvent(e, expectValid, err).Break()
	}
	if !isLast(v, e.PrevHash) {
		return v.breakAt(e.Seq, ReasonPrevMismatch, v.LastHash(), e.PrevHash)
	}
	// The same check as CheckStored, with the scratch kept across events and
	// prev_hash, found equal to the last hash, not decoded again.
	if ie := v.d.check(e, &v.lastRaw); ie != nil {
		return ie.Break()
	}
	v.lastSeq, v.lastHex, v.lastRaw = e.Seq, v.d.hex, v.d.sum
	v.verified++
	return nil
}

// NextCanonical is Next for an event read from its canonical line
// (envelope.ScanCanonical, which has checked it is well formed): the same
// checks in the same order with the same errors, but the hash is taken over
// the line in place instead of a re-encoding of the decoded event.
func (v *Verifier) NextCanonical(c *envelope.CanonicalLine) error {
	if string(c.TenantID) != v.tenant {
		return v.breakAt(c.Seq, ReasonWrongTenant, strconv.Quote(v.tenant), strconv.Quote(string(c.TenantID)))
	}
	if err := v.checkSeq(c.Seq); err != nil {
		return err
	}
	if !isLast(v, c.PrevHash) {
		return v.breakAt(c.Seq, ReasonPrevMismatch, v.LastHash(), string(c.PrevHash))
	}
	before, after := c.Canonical()
	v.d.digest(&v.lastRaw, before, after)
	if string(v.d.hex[:]) != string(c.Hash) {
		return v.breakAt(c.Seq, ReasonHashMismatch, string(v.d.hex[:]), string(c.Hash))
	}
	v.lastSeq, v.lastHex, v.lastRaw = c.Seq, v.d.hex, v.d.sum
	v.verified++
	return nil
}

// NextItem is Next for an event row read from DynamoDB, verified in place:
// the row's canonical line is written straight from its attributes
// (envelope.AppendItemLine, canonical by construction, each field checked
// as it is written as ScanCanonical checks a line) and hashed as
// NextCanonical hashes an export line, without decoding the row into an
// Envelope. handled false means the row was not certainly well
// formed and nothing was checked: decode it (envelope.FromItem) and call
// Next, which gives the verdict and its error.
func (v *Verifier) NextItem(it envelope.Item) (handled bool, err error) {
	line, c, ok := envelope.AppendItemLine(v.line[:0], it)
	if cap(line) <= maxPooledCanon {
		v.line = line[:0]
	}
	if !ok {
		return false, nil
	}
	return true, v.NextCanonical(&c)
}

// breakAt makes the *BreakError for this verifier's tenant.
func (v *Verifier) breakAt(seq int64, r Reason, expected, got string) error {
	return &BreakError{Tenant: v.tenant, Seq: seq, Reason: r, Expected: expected, Got: got}
}

// checkSeq is SPEC.md §6 step 2: seq must follow the last verified one.
func (v *Verifier) checkSeq(seq int64) error {
	want := v.lastSeq + 1
	switch {
	case seq == v.lastSeq && v.lastSeq > 0:
		return v.breakAt(seq, ReasonDuplicateSeq, "seq "+itoa(want), "seq "+itoa(seq))
	case seq < want:
		return v.breakAt(seq, ReasonOutOfOrder, "seq "+itoa(want), "seq "+itoa(seq))
	case seq > want:
		return v.breakAt(want, ReasonMissingSeq, "seq "+itoa(want), "seq "+itoa(seq))
	}
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
	if !isLast(v, h.LastHash) {
		return brk("last_hash "+v.LastHash(), "last_hash "+h.LastHash)
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
