package reconcile

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// cursor is what a resume cursor encodes. It names a walk row; it carries no
// chain position, so it cannot make a walk skip events.
//
// A walk of a tenant with chain shards (TenantRequest for a tenant id whose
// other chains exist) names the chain in progress too: Tenant is the
// request's tenant, Chain the chain to resume (omitted for the tenant's own
// chain, so cursors written before chain shards decode as that), Walk its
// walk row, or none when the page ended before that chain's walk began.
// Broken carries the chains earlier pages found broken, so the last page's
// summary covers every page of the walk; it is the caller's own report
// handed back, not a position.
type cursor struct {
	V      int      `json:"v"`
	All    bool     `json:"all,omitempty"` // pages all tenants
	After  string   `json:"a,omitempty"`   // all tenants: the last tenant finished
	Tenant string   `json:"t,omitempty"`   // the tenant (or chain) whose walk is in progress
	Chain  string   `json:"c,omitempty"`   // a sharded tenant's chain in progress, when not Tenant's own
	Walk   string   `json:"w,omitempty"`   // its walk row id
	Broken []string `json:"x,omitempty"`   // a sharded tenant: chains earlier pages found broken
	Mode   Mode     `json:"m"`
}

// chain is the chain whose walk the cursor continues.
func (c cursor) chain() string {
	if c.Chain != "" {
		return c.Chain
	}
	return c.Tenant
}

const cursorVersion = 1

func encodeCursor(c cursor) string {
	c.V = cursorVersion
	raw, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("reconcile: marshal cursor: %v", err)) // plain strings and ints
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeCursor(s string) (cursor, error) {
	bad := fmt.Errorf("%w: not a cursor this endpoint returned; pass back the cursor of the previous response unchanged, or omit it to start a new walk", ErrBadCursor)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, bad
	}
	var c cursor
	if err := json.Unmarshal(raw, &c); err != nil || c.V != cursorVersion || (c.Mode != Incremental && c.Mode != Full) {
		return cursor{}, bad
	}
	if !c.All && (c.Tenant == "" || c.Walk == "" && c.Chain == "") || c.All && (c.Walk != "" && c.Tenant == "" || c.Chain != "" || c.Broken != nil) {
		return cursor{}, bad
	}
	// A shard's chain of Tenant, which is a tenant id, never Tenant's own.
	if c.Chain != "" {
		if t, k := tenancy.SplitChain(c.Chain); k == 0 || t != c.Tenant || tenancy.CheckTenant(t) != nil {
			return cursor{}, bad
		}
	}
	for _, b := range c.Broken {
		if tenancy.TenantOf(b) != c.Tenant {
			return cursor{}, bad
		}
	}
	return c, nil
}
