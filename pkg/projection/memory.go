package projection

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// Memory is an in-memory Store (tests, local experiments). Safe for
// concurrent use. Its cursors are offsets into a sorted listing, so a page
// may repeat or skip rows written between calls; Table's do not.
type Memory struct {
	mu    sync.Mutex
	rows  map[string]Row
	parks map[string]Park
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{rows: map[string]Row{}, parks: map[string]Park{}} }

func mkey(tenant, entity, id string) string { return tenant + "\x00" + entity + "\x00" + id }

func pkey(tenant, entity, id string, v int64) string {
	return fmt.Sprintf("%s\x00%020d", mkey(tenant, entity, id), v)
}

// Get reads a row.
func (m *Memory) Get(_ context.Context, tenant, entity, id string) (Row, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rows[mkey(tenant, entity, id)]
	return r, ok, nil
}

// Put writes a row conditionally on the version it replaces.
func (m *Memory) Put(_ context.Context, r Row, prev int64, found bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := mkey(r.Tenant, r.Entity, r.ID)
	cur, ok := m.rows[k]
	if ok != found || ok && cur.Version != prev {
		return false, nil
	}
	m.rows[k] = r
	return true, nil
}

// Rows lists rows in key order.
func (m *Memory) Rows(_ context.Context, cursor string, limit int) ([]Row, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return page(m.rows, cursor, limit)
}

// Park keeps p unless that version is parked already.
func (m *Memory) Park(_ context.Context, p Park) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := pkey(p.Tenant, p.Change.Entity, p.Change.ID, p.Change.Version)
	if _, ok := m.parks[k]; !ok {
		m.parks[k] = p
	}
	return nil
}

// Parked reads one park.
func (m *Memory) Parked(_ context.Context, tenant, entity, id string, v int64) (Park, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.parks[pkey(tenant, entity, id, v)]
	return p, ok, nil
}

// Unpark removes one park.
func (m *Memory) Unpark(_ context.Context, tenant, entity, id string, v int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.parks, pkey(tenant, entity, id, v))
	return nil
}

// Parks lists parks in key order.
func (m *Memory) Parks(_ context.Context, cursor string, limit int) ([]Park, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return page(m.parks, cursor, limit)
}

func page[V any](all map[string]V, cursor string, limit int) ([]V, string, error) {
	ks := make([]string, 0, len(all))
	for k := range all {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	from := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return nil, "", fmt.Errorf("cursor %q: %w", cursor, ErrBadCursor)
		}
		from = min(n, len(ks))
	}
	to := min(from+max(limit, 1), len(ks))
	out := make([]V, 0, to-from)
	for _, k := range ks[from:to] {
		out = append(out, all[k])
	}
	if to == len(ks) {
		return out, "", nil
	}
	return out, strconv.Itoa(to), nil
}
