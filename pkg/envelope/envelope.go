package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// MaxItemBytes is DynamoDB's item size limit. An envelope whose encoded item
// exceeds MaxPayloadBytes is refused before anything is sent.
const MaxItemBytes = 400 * 1024

// MaxPayloadBytes leaves room under MaxItemBytes for the envelope's own
// attributes and the attribute names of the item encoding.
const MaxPayloadBytes = MaxItemBytes - 8*1024

// MaxTenantLen bounds a tenant id: it is the FIFO message group (≤ 128 chars).
// The whole rule is tenancy.CheckTenant's.
const MaxTenantLen = tenancy.MaxTenantLen

// MaxSchemaVersion is the largest schema_version (it is an int32 everywhere).
const MaxSchemaVersion = 1<<31 - 1

// MaxSeq is the largest seq: I-JSON's largest exact integer, 2^53 − 1.
const MaxSeq = maxSafeInt

// MaxPayloadDepth is how deeply a payload may nest objects and arrays, the
// payload object itself counting as 1: DynamoDB stores at most 32 levels.
const MaxPayloadDepth = 32

// Envelope is the one event shape. Seq, PrevHash and Hash are set by the store
// on append.
type Envelope struct {
	ID            string         `json:"id"`
	Type          string         `json:"type"`
	TenantID      string         `json:"tenant_id"`
	OccurredAt    string         `json:"occurred_at"`
	SchemaVersion int            `json:"schema_version"`
	CorrelationID string         `json:"correlation_id,omitempty"`
	CausationID   string         `json:"causation_id,omitempty"`
	ActorID       string         `json:"actor_id,omitempty"`
	Payload       map[string]any `json:"payload"`
	Seq           int64          `json:"seq"`
	PrevHash      string         `json:"prev_hash"`
	Hash          string         `json:"hash,omitempty"`
	// TraceParent is the W3C trace context (traceparent) of the request
	// that emitted the event, absent when it had none: the work the event
	// causes downstream joins that trace. It is not part of the event: the
	// hash does not cover it and export lines do not carry it (SPEC.md §1).
	// Validation does not check it: a malformed one is ignored where it is
	// read (tracing.Continue), since no event is worth refusing for its
	// trace.
	TraceParent string `json:"traceparent,omitempty"`
}

// Sentinel errors. Validation errors wrap ErrInvalid inside a *FieldError.
var (
	ErrInvalid       = errors.New("invalid envelope")
	ErrNotEventRow   = errors.New("not an event row")
	ErrUnsupportedAV = errors.New("unsupported attribute value")
)

// FieldError names the field (a path such as payload.items[2].price) that
// failed and what to do about it.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap lets callers test errors.Is(err, ErrInvalid).
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ValidType reports whether t is a well-formed event type name,
// "<module>.<name>": a lowercase module, then one or more dot-separated
// segments of letters, digits, '_' and '-' (entity names of change events may
// be upper case, e.g. record.written.ORDER); at most 256 bytes. As a regular
// expression: ^[a-z][a-z0-9_]*(\.[A-Za-z0-9][A-Za-z0-9_-]*)+$
func ValidType(t string) bool { return validType(t) }

// ValidID reports whether id is a well-formed event id: a UUID in its
// lowercase text form, 8-4-4-4-12 hex digits (NewID's UUIDv7s; change events
// use UUIDv5s). As a regular expression:
// ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$
func ValidID(id string) bool { return validID(id) }

func validID[T string | []byte](id T) bool {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return false
	}
	// Six overlapping words cover the 32 digits; the three that hold a '-'
	// (at their byte 4) see it as a '0'.
	const dash = uint64('-'^'0') << 32
	return hexWord(loadWord(id, 0)) && hexWord(loadWord(id, 9)^dash) && hexWord(loadWord(id, 14)^dash) &&
		hexWord(loadWord(id, 19)^dash) && hexWord(loadWord(id, 24)) && hexWord(loadWord(id, 28))
}

// ValidTime reports whether s is a well-formed occurred_at: RFC 3339 in UTC
// as FormatTime writes it, YYYY-MM-DDTHH:MM:SS[.fraction]Z, with a year from
// 0000 to 9999, a real date of the proleptic Gregorian calendar, hours 00–23,
// minutes and seconds 00–59 (no leap second), and a fraction of one to nine
// digits that does not end in 0.
func ValidTime(s string) bool { return canonicalTime(s) }

// NewID returns a time-ordered event id (UUIDv7).
func NewID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new event id: %w", err)
	}
	return id.String(), nil
}

// FormatTime renders t the way occurred_at is stored: RFC 3339, UTC, with
// nanoseconds when present.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Validate checks everything but seq, prev_hash and hash, which only the
// store sets. Use ValidateStored for a stored event.
func (e *Envelope) Validate() error {
	if e.ID == "" {
		return fieldErr("id", "is empty; use envelope.NewID")
	}
	if !validID(e.ID) {
		return fieldErr("id", "%q is not a UUID in lowercase 8-4-4-4-12 hex form; use envelope.NewID", e.ID)
	}
	if !ValidType(e.Type) {
		return fieldErr("type", "%q is not <module>.<name> (lowercase module, dot, name; e.g. order.placed)", e.Type)
	}
	if !tenancy.ValidTenant(e.TenantID) {
		if e.TenantID == "" {
			return fieldErr("tenant_id", "is empty; bind a tenant at the edge with tenancy.WithTenant")
		}
		return fieldErr("tenant_id", "%v", tenancy.CheckTenant(e.TenantID))
	}
	if !canonicalTime(e.OccurredAt) {
		ts, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
		if err != nil {
			return fieldErr("occurred_at", "%q is not RFC 3339 in UTC, YYYY-MM-DDTHH:MM:SS[.fraction]Z", e.OccurredAt)
		}
		return fieldErr("occurred_at", "%q must be UTC in canonical form %q (envelope.FormatTime), year 0000 to 9999", e.OccurredAt, FormatTime(ts))
	}
	if e.SchemaVersion < 1 || e.SchemaVersion > MaxSchemaVersion {
		return fieldErr("schema_version", "is %d; schema versions run from 1 to %d", e.SchemaVersion, MaxSchemaVersion)
	}
	if e.Payload == nil {
		return fieldErr("payload", "is missing; use an empty object for an event without data")
	}
	n, err := checkValue("payload", e.Payload)
	if err != nil {
		return err
	}
	if n > MaxPayloadBytes {
		return fieldErr("payload", "is %d bytes; at most %d fit in one DynamoDB item with the envelope", n, MaxPayloadBytes)
	}
	return nil
}

// ValidateStored checks a stored event: Validate plus seq, prev_hash and hash.
func (e *Envelope) ValidateStored() error {
	if err := e.Validate(); err != nil {
		return err
	}
	if e.Seq < 1 || e.Seq > MaxSeq {
		return fieldErr("seq", "is %d; event sequence numbers run from 1 to 2^53-1", e.Seq)
	}
	if !isHexHash(e.PrevHash) {
		return fieldErr("prev_hash", "%q is not 64 lowercase hex characters", e.PrevHash)
	}
	if !isHexHash(e.Hash) {
		return fieldErr("hash", "%q is not 64 lowercase hex characters", e.Hash)
	}
	return nil
}

func isHexHash[T string | []byte](s T) bool {
	if len(s) != 64 {
		return false
	}
	// Eight bytes at a time and no branch per character: hex digits are
	// random, so a branch would be mispredicted half the time.
	ok := true
	for i := 0; i < 64; i += 8 {
		ok = hexWord(loadWord(s, i)) && ok
	}
	return ok
}

// hexWord reports whether the eight bytes of x are all lowercase hex
// digits. For bytes below 0x80, adding 0x80−lo sets a byte's high bit
// exactly when it is ≥ lo, and no carry crosses into the next byte.
func hexWord(x uint64) bool {
	geDigit := x + lsb*(0x80-'0')
	gtDigit := x + lsb*(0x7f-'9')
	geLetter := x + lsb*(0x80-'a')
	gtLetter := x + lsb*(0x7f-'f')
	in := geDigit&^gtDigit | geLetter&^gtLetter
	return x&msb == 0 && in&msb == msb
}

// loadWord reads s[i:i+8], the first byte in the low byte (one load on
// little-endian machines).
func loadWord[T string | []byte](s T, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// notHex is 1 for every byte that is not a lowercase hex digit.
var notHex = func() (t [256]byte) {
	for c := range t {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			t[c] = 1
		}
	}
	return t
}()

// CanonicalBytes is RFC 8785 (JCS) of the envelope without its hash field.
// This is what the chain hashes; see pkg/chain/SPEC.md.
func (e *Envelope) CanonicalBytes() ([]byte, error) { return canonical(e, false) }

// AppendCanonicalBytes appends CanonicalBytes to dst, for a caller that
// reuses one buffer across events.
func (e *Envelope) AppendCanonicalBytes(dst []byte) ([]byte, error) {
	return appendCanonical(dst, e, false)
}

// CanonicalJSON is RFC 8785 (JCS) of the whole envelope, hash included: an
// export line (pkg/chain/SPEC.md §5). Its canonical bytes are the line
// without the hash member, so a verifier can hash the line in place (see
// ScanCanonical).
func (e *Envelope) CanonicalJSON() ([]byte, error) { return canonical(e, true) }

// AppendCanonicalJSON appends CanonicalJSON to dst, for a caller that
// reuses one buffer across events (an export).
func (e *Envelope) AppendCanonicalJSON(dst []byte) ([]byte, error) {
	return appendCanonical(dst, e, true)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Payload values are restricted to JSON-marshalable kinds by
		// NormalizePayload and the decoders; reaching here is a programming error.
		panic(fmt.Sprintf("envelope: marshal payload: %v", err))
	}
	return b
}

// ValidTraceParent reports whether tp is a W3C Trace Context traceparent of
// version 00: 00-<32 lowercase hex trace id>-<16 lowercase hex parent id>-
// <2 lowercase hex flags>, neither id all zeros.
func ValidTraceParent(tp string) bool {
	if len(tp) != 55 || tp[0] != '0' || tp[1] != '0' || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return false
	}
	var bad byte
	traceZero, spanZero := true, true
	for i := 3; i < 55; i++ {
		if i == 35 || i == 52 {
			continue
		}
		bad |= notHex[tp[i]]
		if tp[i] != '0' {
			if i < 35 {
				traceZero = false
			} else if i < 52 {
				spanZero = false
			}
		}
	}
	return bad == 0 && !traceZero && !spanZero
}
