package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"sync"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Version is the hash rule's version byte. A new rule gets a new byte.
const Version byte = 0x01

// Domain-separation prefixes: an event hash can never equal a genesis value
// or any other SHA-256 this system computes.
const (
	chainDomain   = "fourlanes/chain"
	genesisDomain = "fourlanes/genesis"
)

// Genesis is the fixed prev_hash of a tenant's first event:
// SHA-256("fourlanes/genesis" 0x00 | Version | tenant_id), lowercase hex.
// It is per tenant, so an event moved to another tenant cannot verify there
// even at seq 1.
func Genesis(tenant string) string {
	h := sha256.New()
	h.Write([]byte(genesisDomain))
	h.Write([]byte{0x00, Version})
	h.Write([]byte(tenant))
	return hex.EncodeToString(h.Sum(nil))
}

// Hash computes the hash of e from e.PrevHash and e's canonical bytes. It
// ignores e.Hash.
func Hash(e *envelope.Envelope) (string, error) {
	canon, err := e.CanonicalBytes()
	if err != nil {
		return "", err
	}
	return HashCanonical(e.PrevHash, canon)
}

// ruleHeader is what the hash rule hashes before raw(prev_hash): the domain,
// 0x00 and the version byte.
var ruleHeader = []byte(chainDomain + "\x00" + string(rune(Version)))

// HashCanonical applies the rule to already-canonical bytes.
func HashCanonical(prevHash string, canonical []byte) (string, error) {
	var prev [sha256.Size]byte
	if !decodeHash(prevHash, &prev) {
		return "", fmt.Errorf("prev_hash %q: %w", prevHash, ErrBadHash)
	}
	h := sha256.New()
	h.Write(ruleHeader)
	h.Write(prev[:])
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// decodeHash decodes 64 lowercase hex digits into out.
func decodeHash[T string | []byte](s T, out *[sha256.Size]byte) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	// Table lookups and one OR, no branch per digit: hex digits are random,
	// so a branch would be mispredicted half the time.
	var bad byte
	for i := range out {
		hi, lo := unhex[s[2*i]], unhex[s[2*i+1]]
		bad |= hi | lo
		out[i] = hi<<4 | lo&0xf
	}
	return bad&0xf0 == 0
}

// unhex maps a lowercase hex digit to its value and anything else to 0xff.
var unhex = func() (t [256]byte) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c - '0')
		case 'a' <= c && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		default:
			t[c] = 0xff
		}
	}
	return t
}()

// Seal sets e.Hash from e.PrevHash and the rest of e.
func Seal(e *envelope.Envelope) error {
	h, err := Hash(e)
	if err != nil {
		return err
	}
	e.Hash = h
	return nil
}

// Head is a tenant's head row: the last committed seq and its hash.
type Head struct {
	TenantID string `json:"tenant_id"`
	LastSeq  int64  `json:"last_seq"`
	LastHash string `json:"last_hash"`
}

// ErrBadHash reports a value that is not 64 lowercase hex characters.
var ErrBadHash = errors.New("not a SHA-256 hex digest")

// Reason says why a chain broke.
type Reason string

// The reasons Verify can give, in the order they are checked per event.
const (
	ReasonWrongTenant  Reason = "wrong tenant"       // the event names another tenant
	ReasonDuplicateSeq Reason = "duplicate seq"      // the seq was already seen
	ReasonOutOfOrder   Reason = "out of order"       // a lower seq after a higher one
	ReasonMissingSeq   Reason = "missing seq"        // a gap before this seq
	ReasonPrevMismatch Reason = "prev_hash mismatch" // the link to the previous hash is broken
	ReasonHashMismatch Reason = "hash mismatch"      // the stored hash is not the recomputed one
	ReasonMalformed    Reason = "malformed event"    // the event does not decode or validate
	ReasonHeadMismatch Reason = "head mismatch"      // the head disagrees with the last event
)

// BreakError names the first break in a tenant's chain.
type BreakError struct {
	Tenant string
	Seq    int64 // the seq at which the chain first fails; 0 when Line names a line whose seq cannot be read
	// Line is the line of an export that breaks when its seq cannot be read
	// (it is not JSON, not an object, a malformed head line, a line after
	// the head line); 0 otherwise.
	Line     int
	Reason   Reason
	Expected string // what the chain required there (a hash, a seq, a tenant)
	Got      string // what was found
}

// Where is "seq N", or "line L" for a break at a line whose seq cannot be read.
func (e *BreakError) Where() string {
	if e.Line != 0 {
		return fmt.Sprintf("line %d", e.Line)
	}
	return fmt.Sprintf("seq %d", e.Seq)
}

func (e *BreakError) Error() string {
	msg := fmt.Sprintf("chain of tenant %q breaks at %s: %s", e.Tenant, e.Where(), e.Reason)
	if e.Expected != "" || e.Got != "" {
		msg += fmt.Sprintf(" (expected %s, got %s)", e.Expected, e.Got)
	}
	return msg
}

// Is lets errors.Is(err, ErrBroken) match any break.
func (e *BreakError) Is(target error) bool { return target == ErrBroken }

// ErrBroken matches every *BreakError under errors.Is.
var ErrBroken = errors.New("chain broken")

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
