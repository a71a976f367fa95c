package delivery

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// MemoryStore is an in-memory Store for unit tests of code that delivers
// (it passes the same conformance suite as DynamoStore, and keeps the same
// layout: one claim item per event, whose TTL goes while an entry is dead).
// Safe for concurrent use.
type MemoryStore struct {
	mu     sync.Mutex
	items  map[string]*memItem           // event id → its claims
	dead   map[string]map[Key]DeadLetter // tenant → key → letter
	marks  map[[2]string]Watermark       // (tenant, subscription) → watermark
	starts map[string]SubStart           // subscription → its recorded start

	backfills  map[[2]string]Backfill    // (tenant, subscription) → cursor
	quarantine map[[3]string]Quarantined // (tenant, subscription, event id)
}

// memItem is an event's claim item.
type memItem struct {
	claims    map[string]*memClaim // by subscription
	deadSubs  map[string]bool
	expiresAt time.Time // zero while an entry is dead
}

type memClaim struct {
	ClaimRecord
	token string
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{items: map[string]*memItem{}, dead: map[string]map[Key]DeadLetter{}}
}

func (m *MemoryStore) item(eventID string) *memItem {
	it := m.items[eventID]
	if it == nil {
		it = &memItem{claims: map[string]*memClaim{}, deadSubs: map[string]bool{}}
		m.items[eventID] = it
	}
	return it
}

func (m *MemoryStore) claim(k Key) *memClaim {
	if it := m.items[k.EventID]; it != nil {
		return it.claims[k.Subscription]
	}
	return nil
}

func (m *MemoryStore) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	cs, err := m.ClaimEvent(ctx, eventRequest(req))
	if err != nil {
		return Claim{}, err
	}
	return cs[0], nil
}

// ClaimEvent takes every claim it can at once, like DynamoStore's single
// write (req.Seen is not needed: the fake reads its own state).
func (m *MemoryStore) ClaimEvent(_ context.Context, req EventClaimRequest) ([]Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Claim, len(req.Subscriptions))
	for i, sub := range req.Subscriptions {
		r := req.request(sub)
		c := m.claim(r.Key)
		if c == nil || c.Status == StatusPending && c.LeaseUntil.Before(req.Now) {
			out[i] = m.take(r, c)
			continue
		}
		out[i] = Claim{Status: c.Status, LeaseUntil: c.LeaseUntil, Attempts: c.Attempts}
	}
	return out, nil
}

func (m *MemoryStore) ClaimDead(_ context.Context, req ClaimRequest) (Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.claim(req.Key)
	if c == nil {
		return Claim{}, fmt.Errorf("replay %s: %w", req.Key, ErrNotDead)
	}
	if c.Status == StatusDead || c.Status == StatusPending && c.LeaseUntil.Before(req.Now) {
		return m.take(req, c), nil
	}
	return Claim{Status: c.Status, LeaseUntil: c.LeaseUntil, Attempts: c.Attempts}, nil
}

// take writes req's claim, taken; a claim replayed from dead stays in the
// item's dead set (and the item without TTL) until Kill or Resolve.
func (m *MemoryStore) take(req ClaimRequest, old *memClaim) Claim {
	attempts := 1
	takenOver := false
	errText := ""
	if old != nil {
		attempts = old.Attempts + 1
		takenOver = old.Status == StatusPending
		errText = old.Error
	}
	it := m.item(req.EventID)
	it.claims[req.Subscription] = &memClaim{ClaimRecord: ClaimRecord{Key: req.Key, Tenant: req.Tenant, Status: StatusPending,
		LeaseUntil: req.LeaseUntil, Attempts: attempts, Error: errText}, token: req.Token}
	if len(it.deadSubs) == 0 && (old == nil || old.Status != StatusDead) {
		it.expiresAt = time.Unix(req.ExpiresAt.Unix(), 0)
	}
	return Claim{Acquired: true, TakenOver: takenOver, Status: StatusPending, LeaseUntil: req.LeaseUntil, Attempts: attempts}
}

func (m *MemoryStore) held(k Key, token string) (*memItem, *memClaim, error) {
	c := m.claim(k)
	if c == nil || c.Status != StatusPending || c.token != token {
		return nil, nil, fmt.Errorf("claim %s: %w", k, ErrLeaseLost)
	}
	return m.items[k.EventID], c, nil
}

func (m *MemoryStore) Complete(_ context.Context, k Key, token string, _, expiresAt time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, c, err := m.held(k, token)
	if err != nil {
		return err
	}
	c.Status, c.token = StatusCompleted, ""
	if len(it.deadSubs) == 0 && !expiresAt.IsZero() {
		it.expiresAt = time.Unix(expiresAt.Unix(), 0)
	}
	return nil
}

func (m *MemoryStore) Kill(_ context.Context, k Key, token string, d DeadLetter, replay bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, c, err := m.held(k, token)
	if err != nil {
		return err
	}
	c.Status, c.token, c.Error = StatusDead, "", d.Error
	it.deadSubs[k.Subscription], it.expiresAt = true, time.Time{}
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
	it, c, err := m.held(k, token)
	if err != nil {
		return err
	}
	c.Status, c.token = StatusCompleted, ""
	delete(it.deadSubs, k.Subscription)
	if len(it.deadSubs) == 0 {
		it.expiresAt = time.Unix(expiresAt.Unix(), 0)
	}
	delete(m.dead[tenant], k)
	return nil
}

func (m *MemoryStore) Get(_ context.Context, k Key) (ClaimRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.claim(k)
	if c == nil {
		return ClaimRecord{}, false, nil
	}
	r := c.ClaimRecord
	r.ExpiresAt = m.items[k.EventID].expiresAt
	return r, true, nil
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

// DeadLetterTenants is the fake's DeadLetterTenants: the tenants with open
// dead letters after cursor, in order.
func (m *MemoryStore) DeadLetterTenants(_ context.Context, cursor string, limit int) ([]string, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []string
	for t, dls := range m.dead {
		if len(dls) > 0 && t > cursor {
			all = append(all, t)
		}
	}
	slices.Sort(all)
	if limit <= 0 {
		limit = 100
	}
	if len(all) > limit {
		return all[:limit], all[limit-1], nil
	}
	return all, "", nil
}
