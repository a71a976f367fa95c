package projection

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Tenant ids may hold '#': (t#ORDER, ORDER, x) and (t, ORDER, ORDER#x) must
// not share a park.
func TestParkKeysDoNotCollide(t *testing.T) {
	s := &Table{Name: "search"}
	key := func(tenant, entity, id string) string {
		k := s.parkKey(tenant, entity, id, 1)
		return k[keys.AttrPK].(*types.AttributeValueMemberS).Value + "|" + k[keys.AttrSK].(*types.AttributeValueMemberS).Value
	}
	if a, b := key("t#ORDER", "ORDER", "x"), key("t", "ORDER", "ORDER#x"); a == b {
		t.Errorf("two different (tenant, entity, id) share the park key %q", a)
	}
}
