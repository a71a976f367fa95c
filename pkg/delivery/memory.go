package delivery

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// MemoryStore is an in-memory Store for unit tests of code that delivers
// (it passes the same conformance suite as DynamoStore). Safe for concurrent use.
type MemoryStore struct {
	mu     sync.Mutex
	claims map[Key]*memClaim
	dead   map[string]map[Key]DeadLetter // tenant → key → letter
	marks  map[[2]string]Watermark       // (tenant, subscription) → watermark
}

type memClaim struct {
	ClaimRecord
	token string
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{claims: map[Key]*memClaim{}, dead: map[string]map[Key]DeadLetter{}}
}

func (m *MemoryStore) Claim(_ context.Context, req ClaimRequest) (Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.claims[req.Key]
	if c == nil || c.Status == StatusPending && c.LeaseUntil.Before(req.Now) {
		return m.take(req, c), nil
	}
	return Claim{Status: c.Status, LeaseUntil: c.LeaseUntil, Attempts: c.Attempts}, nil
}

func (m *MemoryStore) ClaimDead(_ context.Context, req ClaimRequest) (Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.claims[req.Key]
	if c == nil {
		return Claim{}, fmt.Errorf("replay %s: %w", req.Key, ErrNotDead)
	}
	if c.Status == StatusDead || c.Status == StatusPending && c.LeaseUntil.Before(req.Now) {
		return m.take(req, c), nil
	}
	return Claim{Status: c.Status, LeaseUntil: c.LeaseUntil, Attempts: c.Attempts}, nil
}

func (m *MemoryStore) take(req ClaimRequest, old *memClaim) Claim {
	attempts := 1
	takenOver := false
	errText := ""
	if old != nil {
		attempts = old.Attempts + 1
		takenOver = old.Status == StatusPending
		errText = old.Error
	}
	m.claims[req.Key] = &memClaim{ClaimRecord: ClaimRecord{Key: req.Key, Tenant: req.Tenant, Status: StatusPending,
		LeaseUntil: req.LeaseUntil, Attempts: attempts, Error: errText, ExpiresAt: time.Unix(req.ExpiresAt.Unix(), 0)}, token: req.Token}
	return Claim{Acquired: true, TakenOver: takenOver, Status: StatusPending, LeaseUntil: req.LeaseUntil, Attempts: attempts}
}

func (m *MemoryStore) held(k Key, token string) (*memClaim, error) {
	c := m.claims[k]
	if c == nil || c.Status != StatusPending || c.token != token {
		return nil, fmt.Errorf("claim %s: %w", k, ErrLeaseLost)
	}
	return c, nil
}

func (m *MemoryStore) Complete(_ context.Context, k Key, token string, _, expiresAt time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.held(k, token)
	if err != nil {
		return err
	}
	c.Status, c.token, c.ExpiresAt = StatusCompleted, "", time.Unix(expiresAt.Unix(), 0)
	return nil
}

func (m *MemoryStore) Kill(_ context.Context, k Key, token string, d DeadLetter, replay bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.held(k, token)
	if err != nil {
		return err
	}
	c.Status, c.token, c.Error, c.ExpiresAt = StatusDead, "", d.Error, time.Time{}
	if m.dead[d.Tenant] == nil {
		m.dead[d.Tenant] = map[Key]DeadLetter{}
	}
	d.Replays = m.dead[d.Tenant][k].Replays
	if replay {
		d.Replays++
	}
	m.dead[d.Tenant][k] = d
	return nil
}

func (m *MemoryStore) Resolve(_ context.Context, k Key, tenant, token string, _, expiresAt time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.held(k, token)
	if err != nil {
		return err
	}
	c.Status, c.token, c.ExpiresAt = StatusCompleted, "", time.Unix(expiresAt.Unix(), 0)
	delete(m.dead[tenant], k)
	return nil
}

func (m *MemoryStore) Get(_ context.Context, k Key) (ClaimRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.claims[k]
	if c == nil {
		return ClaimRecord{}, false, nil
	}
	return c.ClaimRecord, true, nil
}

func (m *MemoryStore) DeadLetters(_ context.Context, tenant, cursor string, limit int32) ([]DeadLetter, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []DeadLetter
	for _, d := range m.dead[tenant] {
		if d.Key().String() > cursor {
			all = append(all, d)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Key().String() < all[j].Key().String() })
	if limit > 0 && len(all) > int(limit) {
		all = all[:limit]
		return all, all[len(all)-1].Key().String(), nil
	}
	return all, "", nil
}

func (m *MemoryStore) CountDeadLetters(_ context.Context, tenant string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.dead[tenant]), nil
}
