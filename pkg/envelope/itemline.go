package envelope

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// AppendItemLine appends the canonical line (CanonicalJSON) of the event row
// it straight from its attribute values, without building an Envelope. ok
// means the line is certainly the one FromItem and CanonicalJSON would give,
// and the one ScanCanonical would accept and read as the returned
// CanonicalLine: the row is an event row whose attributes have the types
// FromItem wants, every envelope field passes ScanCanonical's rules (well
// formed, written without escapes), every payload string is valid UTF-8,
// every payload name non-empty and written without escapes, every number
// already in canonical form, and the line within ScanCanonical's bounds.
// The line is canonical by construction, so it is not scanned again;
// itemline_test.go checks ScanCanonical accepts every line it returns, and
// that the two give the same CanonicalLine. Anything else is "not
// certainly" (dst is returned cut back to its length): decode the row with
// FromItem, which gives the verdict and the error. An attribute FromItem
// ignores (a well-typed trace_parent, or one it does not know) is left out,
// as FromItem and CanonicalJSON leave it out.
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
	// str writes a string member, its value checked by valid, and returns
	// where the value's bytes start in b (0 when absent).
	str := func(name, attr string, required bool, valid func(string) bool) int {
		if !ok {
			return 0
		}
		av, present := it[attr]
		if !present {
			ok = !required
			return 0
		}
		s, isS := av.(*types.AttributeValueMemberS)
		if !isS || s.Value == "" || (valid != nil && !valid(s.Value)) {
			ok = false
			return 0
		}
		if len(b) > start+1 {
			b = append(b, ',')
		}
		b = append(b, name...)
		at := len(b) + 1
		b, ok = appendString(b, s.Value)
		if ok && len(b)-at != len(s.Value)+1 {
			ok = false // escaped: ScanCanonical leaves such a field to decoding
		}
		return at
	}
	num := func(name, attr string) int64 {
		if !ok {
			return 0
		}
		n, isN := it[attr].(*types.AttributeValueMemberN)
		if !isN {
			ok = false
			return 0
		}
		v, isCount := countValue(n.Value)
		if !isCount {
			ok = false
			return 0
		}
		b = append(b, name...)
		b = append(b, n.Value...)
		return v
	}
	str(`"actor_id":`, keys.AttrActorID, false, nil)
	str(`"causation_id":`, keys.AttrCausationID, false, nil)
	str(`"correlation_id":`, keys.AttrCorrelationID, false, nil)
	hashStart := len(b)
	if len(b) > start+1 {
		hashStart++ // after the comma
	}
	hash := str(`"hash":`, keys.AttrHash, true, isHexHash[string])
	hashEnd := len(b) + 1 // after the comma that follows
	str(`"id":`, keys.AttrID, true, validID[string])
	str(`"occurred_at":`, keys.AttrOccurredAt, true, canonicalTime[string])
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
	prev := str(`"prev_hash":`, keys.AttrPrevHash, true, isHexHash[string])
	version := num(`,"schema_version":`, keys.AttrSchemaVersion)
	seq := num(`,"seq":`, keys.AttrSeq)
	tenant := str(`"tenant_id":`, keys.AttrTenant, true, tenancy.ValidTenant[string])
	tenantEnd := len(b) - 1
	str(`"type":`, keys.AttrType, true, validType[string])
	if !ok || version > MaxSchemaVersion || len(b)+1-start > maxScanLine {
		return fail()
	}
	b = append(b, '}')
	line := b[start:]
	return b, CanonicalLine{
		Line:      line,
		TenantID:  b[tenant:tenantEnd],
		PrevHash:  b[prev : prev+64],
		Hash:      b[hash : hash+64],
		Seq:       seq,
		hashStart: hashStart - start,
		hashEnd:   hashEnd - start,
	}, true
}

// countValue is scanCount's rule for a whole number attribute: a positive
// decimal integer of one to 15 digits without a leading zero.
func countValue(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 15 || s[0] == '0' {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if !digit(s[i]) {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// appendAVMap writes a payload map as appendObject writes the map FromItem
// decodes it to: members sorted by their names' UTF-16 code units. It says
// no to what scanPayload would refuse: a name empty, escaped or not UTF-8,
// nesting deeper than maxScanDepth; and to an object wider than smallObject.
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
		name := members[i].name
		at := len(b)
		var ok bool
		if b, ok = appendString(b, name); !ok || name == "" || len(b)-at != len(name)+2 {
			// Invalid UTF-8, empty (DynamoDB refuses it), or escaped (an
			// escaped name is ScanCanonical's to leave to decoding).
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
