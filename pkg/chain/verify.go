package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
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

	// The last hash: lastStr, or the 64 bytes of lastBuf when lastInBuf (an
	// event hashed in place leaves it there, so no string is allocated per
	// event). lastRaw is its 32 bytes when rawOK, so the next event's
	// prev_hash, once found equal to it, need not be decoded.
	lastStr   string
	lastBuf   [2 * sha256.Size]byte
	lastInBuf bool
	lastRaw   [sha256.Size]byte
	rawOK     bool

	// Scratch reused across events, so verifying allocates next to nothing.
	h     hash.Hash
	canon []byte
	sum   [sha256.Size]byte
	hex   [2 * sha256.Size]byte
}

// NewVerifier starts at the tenant's genesis.
func NewVerifier(tenant string) *Verifier {
	return &Verifier{tenant: tenant, lastStr: Genesis(tenant)}
}

// Resume starts after an already-verified event (a checkpoint): seq and hash
// are that event's. The events before it are trusted; a full walk
// (NewVerifier) re-checks them.
func Resume(tenant string, seq int64, hash string) *Verifier {
	if seq == 0 {
		return NewVerifier(tenant)
	}
	return &Verifier{tenant: tenant, lastSeq: seq, lastStr: hash}
}

// LastSeq is the seq of the last event that verified (0 before any).
func (v *Verifier) LastSeq() int64 { return v.lastSeq }

// LastHash is the hash of the last event that verified (the genesis before any).
func (v *Verifier) LastHash() string {
	if v.lastInBuf {
		return string(v.lastBuf[:])
	}
	return v.lastStr
}

// isLast reports whether h is the last hash, without allocating.
func isLast[T string | []byte](v *Verifier, h T) bool {
	if v.lastInBuf {
		return string(h) == string(v.lastBuf[:])
	}
	return string(h) == v.lastStr
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
	if err := e.ValidateStored(); err != nil {
		return v.breakAt(e.Seq, ReasonMalformed, "a valid stored event", err.Error())
	}
	if !isLast(v, e.PrevHash) {
		return v.breakAt(e.Seq, ReasonPrevMismatch, v.LastHash(), e.PrevHash)
	}
	canon, err := e.AppendCanonicalBytes(v.canon[:0])
	if err != nil {
		return v.breakAt(e.Seq, ReasonMalformed, "canonical bytes", err.Error())
	}
	v.canon = canon
	if !digest(v, e.PrevHash, canon, nil) {
		return v.breakAt(e.Seq, ReasonMalformed, "prev_hash of 64 hex digits", e.PrevHash) // ValidateStored rules this out
	}
	if string(v.hex[:]) != e.Hash {
		return v.breakAt(e.Seq, ReasonHashMismatch, string(v.hex[:]), e.Hash)
	}
	v.lastSeq, v.lastStr, v.lastInBuf = e.Seq, e.Hash, false
	v.lastRaw, v.rawOK = v.sum, true
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
	if !digest(v, c.PrevHash, before, after) {
		return v.breakAt(c.Seq, ReasonMalformed, "prev_hash of 64 hex digits", string(c.PrevHash)) // ScanCanonical rules this out
	}
	if string(v.hex[:]) != string(c.Hash) {
		return v.breakAt(c.Seq, ReasonHashMismatch, string(v.hex[:]), string(c.Hash))
	}
	v.lastSeq, v.lastBuf, v.lastInBuf = c.Seq, v.hex, true
	v.lastRaw, v.rawOK = v.sum, true
	v.verified++
	return nil
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

// digest applies the hash rule to prevHash and the canonical bytes a‖b and
// leaves the digest in v.sum and its lowercase hex in v.hex. prevHash has
// been found equal to the last hash. false: prevHash is not 64 hex digits.
func digest[T string | []byte](v *Verifier, prevHash T, a, b []byte) bool {
	prev := v.lastRaw
	if !v.rawOK && !decodeHash(prevHash, &prev) {
		return false
	}
	if v.h == nil {
		v.h = sha256.New()
	}
	v.h.Reset()
	v.h.Write(ruleHeader)
	v.h.Write(prev[:])
	v.h.Write(a)
	v.h.Write(b)
	hex.Encode(v.hex[:], v.h.Sum(v.sum[:0]))
	return true
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
