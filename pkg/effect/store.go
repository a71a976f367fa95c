package effect

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Key identifies one effect: (event, subscription, effect name).
type Key struct {
	EventID      string
	Subscription string
	Name         string
}

// String is "<event id>:<subscription>:<name>", the key handed to fn.
func (k Key) String() string { return k.EventID + ":" + k.Subscription + ":" + k.Name }

// ParseKey parses what Key.String returns.
func ParseKey(s string) (Key, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || !validName(parts[2]) {
		return Key{}, fmt.Errorf("effect key %q: want <event id>:<subscription>:<effect name>", s)
	}
	return Key{EventID: parts[0], Subscription: parts[1], Name: parts[2]}, nil
}

// Status is an effect record's state.
type Status string

// Effect record states.
const (
	StatusStarted Status = keys.EffectStarted // a delivery started it (Token)
	StatusDone    Status = keys.EffectDone    // it happened
	StatusUnknown Status = keys.EffectUnknown // AtMostOnce: nobody knows whether it happened
	StatusRedo    Status = keys.EffectRedo    // an operator decided it is to be done again
)

// Record is an effect record as stored.
type Record struct {
	Key
	Tenant    string
	Seq       int64
	Status    Status
	Token     string // the delivery that started it (or did it)
	Attempts  int    // start writes
	UpdatedAt time.Time
	ExpiresAt time.Time // zero while unknown or redo: kept until decided and done
}

// Found reports whether the record exists.
func (r Record) Found() bool { return r.Status != "" }

// Store keeps effect records. Every method that changes a record does so
// atomically (one conditional write), because deliveries of one event race
// on it, and is safe to repeat: a resent request that finds its own earlier
// write done answers as that write did. DynamoStore is the implementation;
// MemoryStore is a fake that passes the same suite.
type Store interface {
	// Start records r (StatusStarted under r.Token) if the effect is
	// absent, started under r.Token already, marked redo, or, when takeover
	// is true, started under another token. It then returns the record as
	// it was before (Found false when absent) and started true; otherwise
	// it writes nothing and returns the record as it is.
	Start(ctx context.Context, r Record, takeover bool) (prev Record, started bool, err error)
	// Done marks k done if it is started (or done) under token, to expire
	// at expiresAt; ErrNotHeld otherwise.
	Done(ctx context.Context, k Key, token string, now, expiresAt time.Time) error
	// Release deletes k's record if it is started under token; otherwise it
	// does nothing (nil).
	Release(ctx context.Context, k Key, token string) error
	// MarkUnknown marks k unknown, never to expire, if it is started (or
	// unknown) under token; ErrNotHeld otherwise.
	MarkUnknown(ctx context.Context, k Key, token string, now time.Time) error
	// Decide records an operator's decision on an unknown effect: to is
	// StatusRedo (do it again on the next delivery) or StatusDone (it
	// happened; expiring at expiresAt). ErrNotUnknown if it is not unknown.
	Decide(ctx context.Context, k Key, to Status, now, expiresAt time.Time) (Record, error)
	// Get reads k's record.
	Get(ctx context.Context, k Key) (Record, bool, error)
}

// MemoryStore is an in-memory Store, for tests of handlers that call Do.
type MemoryStore struct {
	mu   sync.Mutex
	recs map[Key]Record
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{recs: map[Key]Record{}} }

var _ Store = (*MemoryStore)(nil)

// Start implements Store.
func (m *MemoryStore) Start(_ context.Context, r Record, takeover bool) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, ok := m.recs[r.Key]
	if ok && !startable(prev, r.Token, takeover) {
		return prev, false, nil
	}
	r.Status, r.Attempts = StatusStarted, prev.Attempts+1
	m.recs[r.Key] = r
	return prev, true, nil
}

// startable is Start's condition on an existing record.
func startable(prev Record, token string, takeover bool) bool {
	switch prev.Status {
	case StatusRedo:
		return true
	case StatusStarted:
		return prev.Token == token || takeover
	}
	return false
}

// Done implements Store.
func (m *MemoryStore) Done(_ context.Context, k Key, token string, now, expiresAt time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[k]
	if !ok || r.Token != token || (r.Status != StatusStarted && r.Status != StatusDone) {
		return fmt.Errorf("effect %s done: %w", k, ErrNotHeld)
	}
	r.Status, r.UpdatedAt, r.ExpiresAt = StatusDone, now, expiresAt
	m.recs[k] = r
	return nil
}

// Release implements Store.
func (m *MemoryStore) Release(_ context.Context, k Key, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.recs[k]; ok && r.Token == token && r.Status == StatusStarted {
		delete(m.recs, k)
	}
	return nil
}

// MarkUnknown implements Store.
func (m *MemoryStore) MarkUnknown(_ context.Context, k Key, token string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[k]
	if !ok || r.Token != token || (r.Status != StatusStarted && r.Status != StatusUnknown) {
		return fmt.Errorf("effect %s unknown: %w", k, ErrNotHeld)
	}
	r.Status, r.UpdatedAt, r.ExpiresAt = StatusUnknown, now, time.Time{}
	m.recs[k] = r
	return nil
}

// Decide implements Store.
func (m *MemoryStore) Decide(_ context.Context, k Key, to Status, now, expiresAt time.Time) (Record, error) {
	if err := checkDecision(k, to); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[k]
	if !ok || r.Status != StatusUnknown {
		return r, notUnknown(k, r)
	}
	r.Status, r.UpdatedAt = to, now
	if to == StatusDone {
		r.ExpiresAt = expiresAt
	}
	m.recs[k] = r
	return r, nil
}

// Get implements Store.
func (m *MemoryStore) Get(_ context.Context, k Key) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[k]
	return r, ok, nil
}

func checkDecision(k Key, to Status) error {
	if to != StatusRedo && to != StatusDone {
		return fmt.Errorf("effect %s: decide %q: want %s or %s", k, to, StatusRedo, StatusDone)
	}
	return nil
}

func notUnknown(k Key, r Record) error {
	st := string(r.Status)
	if !r.Found() {
		st = "absent"
	}
	return fmt.Errorf("effect %s is %s: %w; only an unknown effect awaits a decision", k, st, ErrNotUnknown)
}
