package keys_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// KeyString is one string per key: equal keys give equal strings whatever
// the map's order, and a value's type is part of it.
func TestKeyString(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	a := keys.KeyString(map[string]types.AttributeValue{"pk": s("t1"), "sk": n("7")})
	for range 20 {
		if b := keys.KeyString(map[string]types.AttributeValue{"sk": n("7"), "pk": s("t1")}); a != b {
			t.Fatalf("same key, different strings: %q, %q", a, b)
		}
	}
	for _, other := range []map[string]types.AttributeValue{
		{"pk": s("t1"), "sk": s("7")},
		{"pk": s("t1"), "sk": n("8")},
		{"pk": s("t1=sk"), "sk": n("7")},
		{"pk": &types.AttributeValueMemberB{Value: []byte("t1")}, "sk": n("7")},
	} {
		if keys.KeyString(other) == a {
			t.Errorf("%v renders as %q, like a different key", other, a)
		}
	}
}
