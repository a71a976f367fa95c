package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"sync"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// IntegrityError says why a stored event cannot be trusted on its own: it is
// malformed (ReasonMalformed), or its stored hash is not the one its
// prev_hash and canonical bytes give (ReasonHashMismatch). It says nothing of
// the event's place in the chain (its link to the event before, its seq);
// Verify checks those.
type IntegrityError struct {
	Tenant   string
	Seq      int64
	Reason   Reason // ReasonMalformed or ReasonHashMismatch
	Stored   string // the hash the event carries
	Computed string // the hash recomputed from prev_hash and the canonical bytes; "" when malformed
	// Err is what is malformed (a *envelope.FieldError, or the canonical
	// encoder's error); nil for a hash mismatch.
	Err error

	// expected is what a chain walk required where the event is malformed
	// (see Break).
	expected string
}

func (e *IntegrityError) Error() string {
	what := fmt.Sprintf("stored hash %s, but its prev_hash and canonical bytes hash to %s", e.Stored, e.Computed)
	if e.Reason != ReasonHashMismatch {
		what = fmt.Sprintf("%s: %v", e.Reason, e.Err)
	}
	return fmt.Sprintf("tenant %q seq %d: %s (tampered or corrupted): run reconcile on the tenant", e.Tenant, e.Seq, what)
}

// Unwrap returns Err.
func (e *IntegrityError) Unwrap() error { return e.Err }

// Break is the *BreakError a chain walk (Verify) reports at this event.
func (e *IntegrityError) Break() *BreakError {
	b := &BreakError{Tenant: e.Tenant, Seq: e.Seq, Reason: e.Reason}
	if e.Reason == ReasonHashMismatch {
		b.Expected, b.Got = e.Computed, e.Stored
		return b
	}
	b.Expected = e.expected
	if b.Expected == "" {
		b.Expected = expectValid
	}
	if e.Err != nil {
		b.Got = e.Err.Error()
	}
	return b
}

// What a chain walk requires of a malformed event, by the check it failed.
const (
	expectValid = "a valid stored event" // envelope.ValidateStored
	expectCanon = "canonical bytes"      // the canonical encoding
)

func malformedEvent(e *envelope.Envelope, expected string, err error) *IntegrityError {
	return &IntegrityError{Tenant: e.TenantID, Seq: e.Seq, Reason: ReasonMalformed, Stored: e.Hash, Err: err, expected: expected}
}

// CheckStored checks what a stored event needs to be trusted on its own,
// wherever it was read from (a log row, a stream image, a queue message): it
// is a valid stored event (envelope.ValidateStored), and its hash is the one
// the hash rule gives for its prev_hash and canonical bytes. A non-nil error
// is always an *IntegrityError.
func CheckStored(e *envelope.Envelope) error {
	if err := e.ValidateStored(); err != nil {
		return malformedEvent(e, expectValid, err)
	}
	var prev [sha256.Size]byte
	decodeHash(e.PrevHash, &prev) // ValidateStored found 64 lowercase hex digits
	d := digesters.Get().(*digester)
	ie := d.check(e, &prev)
	if cap(d.canon) <= maxPooledCanon {
		digesters.Put(d)
	}
	if ie != nil {
		return ie
	}
	return nil
}

// digesters keeps CheckStored's scratch between calls; maxPooledCanon keeps
// an occasional huge event from pinning memory.
var digesters = sync.Pool{New: func() any { return new(digester) }}

const maxPooledCanon = 64 << 10

// digester applies the hash rule with scratch a Verifier reuses across
// events, so verifying allocates next to nothing.
type digester struct {
	h     hash.Hash
	canon []byte
	sum   [sha256.Size]byte
	hex   [2 * sha256.Size]byte
}

// check recomputes e's hash, prev being the raw bytes of e.PrevHash, and
// compares it with the stored one. On success the digest is in d.sum and
// d.hex.
func (d *digester) check(e *envelope.Envelope, prev *[sha256.Size]byte) *IntegrityError {
	canon, err := e.AppendCanonicalBytes(d.canon[:0])
	if err != nil {
		return malformedEvent(e, expectCanon, err)
	}
	d.canon = canon
	d.digest(prev, canon, nil)
	if string(d.hex[:]) != e.Hash {
		return &IntegrityError{Tenant: e.TenantID, Seq: e.Seq, Reason: ReasonHashMismatch, Stored: e.Hash, Computed: string(d.hex[:])}
	}
	return nil
}

// digest applies the hash rule to prev (the raw bytes of a prev_hash) and
// the canonical bytes a‖b and leaves the digest in d.sum and its lowercase
// hex in d.hex.
func (d *digester) digest(prev *[sha256.Size]byte, a, b []byte) {
	if d.h == nil {
		d.h = sha256.New()
	}
	d.h.Reset()
	d.h.Write(ruleHeader)
	d.h.Write(prev[:])
	d.h.Write(a)
	d.h.Write(b)
	hex.Encode(d.hex[:], d.h.Sum(d.sum[:0]))
}
