package envelope

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// AppendItemLine appends the canonical line (CanonicalJSON) of the event row
// it straight from its attribute values, without building an Envelope, and
// reads the line back with ScanCanonical. ok means the line is certainly the
// one FromItem and CanonicalJSON would give: the row is an event row whose
// attributes have the types FromItem wants, every payload string is valid
// UTF-8, every number already in canonical form, and ScanCanonical accepts
// the line as a valid stored envelope. Anything else is "not certainly"
// (dst is returned cut back to its length): decode the row with FromItem,
// which gives the verdict and the error. An attribute FromItem ignores
// (a well-typed trace_parent, or one it does not know) is left out, as FromItem and
// CanonicalJSON leave it out.
func AppendItemLine(dst []byte, it Item) ([]byte, CanonicalLine, bool) {
	start := len(dst)
	fail := func() ([]byte, CanonicalLine, bool) { return dst[:start], CanonicalLine{}, false }
	if k, ok := it[keys.AttrKind].(*types.AttributeValueMemberS); !ok || k.Value != keys.KindEvent {
		return fail()
	}
	if av, present := it[keys.AttrTraceParent]; present {
		if s, isS := av.(*types.AttributeValueMemberS); !isS || s.Value == "" {
			return fail() // FromItem refuses it
		}
	}
	b := append(dst, '{')
	ok := true
	str := func(name, attr string, required, comma bool) {
		if !ok {
			return
		}
		av, present := it[attr]
		if !present {
			ok = !required
			return
		}
		s, isS := av.(*types.AttributeValueMemberS)
		if !isS || s.Value == "" {
			ok = false
			return
		}
		b = append(b, name...)
		b, ok = appendString(b, s.Value)
		if comma {
			b = append(b, ',')
		}
	}
	num := func(name, attr string) {
		if !ok {
			return
		}
		n, isN := it[attr].(*types.AttributeValueMemberN)
		if !isN {
			ok = false
			return
		}
		b = append(b, name...)
		b = append(b, n.Value...) // ScanCanonical checks it is a plain count
	}
	str(`"actor_id":`, keys.AttrActorID, false, true)
	str(`"causation_id":`, keys.AttrCausationID, false, true)
	str(`"correlation_id":`, keys.AttrCorrelationID, false, true)
	str(`"hash":`, keys.AttrHash, true, true)
	str(`"id":`, keys.AttrID, true, false)
	str(`,"occurred_at":`, keys.AttrOccurredAt, true, false)
	if !ok {
		return fail()
	}
	p, isM := it[keys.AttrPayload].(*types.AttributeValueMemberM)
	if !isM {
		return fail()
	}
	b = append(b, `,"payload":`...)
	if b, ok = appendAVMap(b, p.Value, 1); !ok {
		return fail()
	}
	str(`,"prev_hash":`, keys.AttrPrevHash, true, false)
	num(`,"schema_version":`, keys.AttrSchemaVersion)
	num(`,"seq":`, keys.AttrSeq)
	str(`,"tenant_id":`, keys.AttrTenant, true, false)
	str(`,"type":`, keys.AttrType, true, false)
	if !ok {
		return fail()
	}
	b = append(b, '}')
	c, ok := ScanCanonical(b[start:])
	if !ok {
		return fail()
	}
	return b, c, true
}

// appendAVMap writes a payload map as appendObject writes the map FromItem
// decodes it to: members sorted by their names' UTF-16 code units.
func appendAVMap(b []byte, m map[string]types.AttributeValue, depth int) ([]byte, bool) {
	if depth > maxScanDepth || len(m) > smallObject {
		return b, false // deep or wide: the decoding path
	}
	type member struct {
		name  string
		value types.AttributeValue
	}
	var members [smallObject]member
	n := 0
	for k, v := range m {
		j := n
		for ; j > 0 && compareUTF16(members[j-1].name, k) > 0; j-- {
			members[j] = members[j-1]
		}
		members[j] = member{k, v}
		n++
	}
	b = append(b, '{')
	for i := range members[:n] {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendString(b, members[i].name); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = appendAV(b, members[i].value, depth); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendAV(b []byte, av types.AttributeValue, depth int) ([]byte, bool) {
	switch x := av.(type) {
	case *types.AttributeValueMemberS:
		return appendString(b, x.Value)
	case *types.AttributeValueMemberN:
		if !canonicalNumber(x.Value) && (len(x.Value) > 32 || !isCanonicalNumber(x.Value)) {
			return b, false // the decoding path canonicalizes (or refuses) it
		}
		return append(b, x.Value...), true
	case *types.AttributeValueMemberBOOL:
		if x.Value {
			return append(b, "true"...), true
		}
		return append(b, "false"...), true
	case *types.AttributeValueMemberNULL:
		return append(b, "null"...), true
	case *types.AttributeValueMemberM:
		return appendAVMap(b, x.Value, depth+1)
	case *types.AttributeValueMemberL:
		if depth+1 > maxScanDepth {
			return b, false
		}
		b = append(b, '[')
		for i, e := range x.Value {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendAV(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return b, false // nil, binary, sets: FromItem refuses them
}
