package search

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Tenant ids may hold '#': (t#ORDER, ORDER, x) and (t, ORDER, ORDER#x) must not share a
// parked row.
func TestParkKeysDoNotCollide(t *testing.T) {
	pk := func(tenant, entity, id string) string {
		return parkKey(tenant, entity, id, 1)[keys.AttrPK].(*types.AttributeValueMemberS).Value
	}
	if a, b := pk("t#ORDER", "ORDER", "x"), pk("t", "ORDER", "ORDER#x"); a == b {
		t.Errorf("two different (tenant, entity, id) share the parked key %q", a)
	}
}
