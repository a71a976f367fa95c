package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// MaxItemBytes is DynamoDB's item size limit. An envelope whose encoded item
// exceeds MaxPayloadBytes is refused before anything is sent.
const MaxItemBytes = 400 * 1024

// MaxPayloadBytes leaves room under MaxItemBytes for the envelope's own
// attributes and the attribute names of the item encoding.
const MaxPayloadBytes = MaxItemBytes - 8*1024

// MaxTenantLen bounds a tenant id: it is the FIFO message group (≤ 128 chars).
const MaxTenantLen = 128

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
	if len(e.ID) > 90 {
		return fieldErr("id", "is %d characters; at most 90 fit a derived FIFO dedup id", len(e.ID))
	}
	if !ValidType(e.Type) {
		return fieldErr("type", "%q is not <module>.<name> (lowercase module, dot, name; e.g. order.placed)", e.Type)
	}
	if e.TenantID == "" {
		return fieldErr("tenant_id", "is empty; bind a tenant at the edge with tenancy.WithTenant")
	}
	if len(e.TenantID) > MaxTenantLen {
		return fieldErr("tenant_id", "is %d characters; at most %d (it is the FIFO message group)", len(e.TenantID), MaxTenantLen)
	}
	if !canonicalTime(e.OccurredAt) { // the common spelling, recognized without parsing
		ts, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
		if err != nil {
			return fieldErr("occurred_at", "%q is not RFC 3339", e.OccurredAt)
		}
		if FormatTime(ts) != e.OccurredAt {
			return fieldErr("occurred_at", "%q must be UTC in canonical form %q", e.OccurredAt, FormatTime(ts))
		}
	}
	if e.SchemaVersion < 1 {
		return fieldErr("schema_version", "is %d; schema versions start at 1", e.SchemaVersion)
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
	if e.Seq < 1 {
		return fieldErr("seq", "is %d; event sequence numbers start at 1", e.Seq)
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
	// A table and an OR instead of a branch per character: hex digits are
	// random, so the branch would be mispredicted half the time.
	var bad byte
	for i := 0; i < 64; i++ {
		bad |= notHex[s[i]]
	}
	return bad == 0
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

// DecodePayload decodes the payload into v (a pointer to the declared payload
// type), refusing fields v does not have.
func (e *Envelope) DecodePayload(v any) error {
	return decodeStrict(mustJSON(e.Payload), v)
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
