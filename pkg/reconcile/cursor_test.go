package reconcile

import (
	"encoding/base64"
	"errors"
	"testing"
)

func rawCursor(json string) string { return base64.RawURLEncoding.EncodeToString([]byte(json)) }

// A cursor written before chain shards (no chain) continues the tenant's own
// chain; a chain cursor must name a shard of its tenant.
func TestCursorChains(t *testing.T) {
	old, err := decodeCursor(rawCursor(`{"v":1,"t":"acme","w":"w1","m":"incremental"}`))
	if err != nil || old.chain() != "acme" || old.Walk != "w1" {
		t.Fatalf("pre-shard cursor: got %+v (chain %q), %v; want acme's walk w1", old, old.chain(), err)
	}
	c := cursor{Tenant: "hot", Chain: "hot~5", Broken: []string{"hot~2"}, Mode: Full}
	got, err := decodeCursor(encodeCursor(c))
	if err != nil || got.chain() != "hot~5" || got.Walk != "" || len(got.Broken) != 1 || got.Broken[0] != "hot~2" {
		t.Fatalf("round trip of %+v: got %+v, %v", c, got, err)
	}
	for name, js := range map[string]string{
		"chain of another tenant":     `{"v":1,"t":"hot","c":"cold~5","m":"full"}`,
		"chain that is no shard":      `{"v":1,"t":"hot","c":"hot","w":"w1","m":"full"}`,
		"shard 0 spelled out":         `{"v":1,"t":"hot","c":"hot~0","w":"w1","m":"full"}`,
		"chain of a chain":            `{"v":1,"t":"hot~1","c":"hot~1~2","w":"w1","m":"full"}`,
		"broken chain of another":     `{"v":1,"t":"hot","c":"hot~5","x":["cold"],"m":"full"}`,
		"no walk and no chain":        `{"v":1,"t":"hot","m":"full"}`,
		"all tenants naming a chain":  `{"v":1,"all":true,"c":"hot~5","m":"full"}`,
		"all tenants carrying broken": `{"v":1,"all":true,"x":[],"m":"full"}`,
	} {
		if _, err := decodeCursor(rawCursor(js)); !errors.Is(err, ErrBadCursor) {
			t.Errorf("%s: got %v, want ErrBadCursor", name, err)
		}
	}
}
