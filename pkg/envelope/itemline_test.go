package envelope

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// mutateItem changes one attribute of an event row the way a tamperer or
// another writer could: a wrong type, an empty or odd string, a number in
// another spelling, a member gone or added, deep nesting.
func mutateItem(r *rand.Rand, it Item) Item {
	c := Item{}
	for k, v := range it {
		c[k] = v
	}
	names := []string{keys.AttrKind, keys.AttrTenant, keys.AttrSeq, keys.AttrID, keys.AttrType, keys.AttrOccurredAt,
		keys.AttrSchemaVersion, keys.AttrPayload, keys.AttrPrevHash, keys.AttrHash, keys.AttrCorrelationID,
		keys.AttrCausationID, keys.AttrActorID, keys.AttrTraceParent, "extra"}
	name := names[r.IntN(len(names))]
	vals := []types.AttributeValue{
		nil,
		&types.AttributeValueMemberS{Value: ""},
		&types.AttributeValueMemberS{Value: "x\x00y"},
		&types.AttributeValueMemberS{Value: "\xff"},
		&types.AttributeValueMemberS{Value: "head"},
		&types.AttributeValueMemberN{Value: "1"},
		&types.AttributeValueMemberN{Value: "07"},
		&types.AttributeValueMemberN{Value: "1e2"},
		&types.AttributeValueMemberN{Value: "1.50"},
		&types.AttributeValueMemberN{Value: "-0"},
		&types.AttributeValueMemberBOOL{Value: true},
		&types.AttributeValueMemberNULL{Value: true},
		&types.AttributeValueMemberB{Value: []byte("x")},
		&types.AttributeValueMemberSS{Value: []string{"a"}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"": &types.AttributeValueMemberS{Value: "v"}}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": &types.AttributeValueMemberN{Value: "1.0"}}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"é": nil, "e": &types.AttributeValueMemberL{}}},
		deepAV(MaxPayloadDepth),
		deepAV(MaxPayloadDepth + 1),
	}
	if v := vals[r.IntN(len(vals))]; v == nil {
		delete(c, name)
	} else {
		c[name] = v
	}
	if p, ok := c[keys.AttrPayload].(*types.AttributeValueMemberM); ok && r.IntN(3) == 0 && len(p.Value) > 0 {
		// change one payload member instead
		m := map[string]types.AttributeValue{}
		for k, v := range p.Value {
			m[k] = v
		}
		for k := range m {
			m[k] = vals[1+r.IntN(len(vals)-1)]
			break
		}
		c[keys.AttrPayload] = &types.AttributeValueMemberM{Value: m}
	}
	return c
}

func deepAV(depth int) types.AttributeValue {
	var v types.AttributeValue = &types.AttributeValueMemberS{Value: "leaf"}
	for range depth {
		v = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"d": v}}
	}
	return v
}

// checkItemLine: whenever AppendItemLine says yes, FromItem decodes the row
// and CanonicalJSON gives exactly its line, and the CanonicalLine it
// returns names that line.
func checkItemLine(t *testing.T, it Item) bool {
	t.Helper()
	prefix := []byte("prefix")
	b, c, ok := AppendItemLine(bytes.Clone(prefix), it)
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("AppendItemLine lost what dst held: %q", b)
	}
	if !ok {
		if len(b) != len(prefix) {
			t.Fatalf("AppendItemLine said no but left %q", b[len(prefix):])
		}
		return false
	}
	e, err := FromItem(it)
	if err != nil {
		t.Fatalf("AppendItemLine took a row FromItem refuses (%v): %q", err, b[len(prefix):])
	}
	want, err := e.CanonicalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[len(prefix):], want) || !bytes.Equal(c.Line, want) {
		t.Fatalf("AppendItemLine wrote\n%q\nCanonicalJSON of FromItem gives\n%q", b[len(prefix):], want)
	}
	// The line is canonical by construction; ScanCanonical must agree, and
	// read the same fields at the same places.
	sc, scanned := ScanCanonical(c.Line)
	if !scanned {
		t.Fatalf("AppendItemLine wrote a line ScanCanonical refuses: %q", c.Line)
	}
	if !bytes.Equal(sc.TenantID, c.TenantID) || !bytes.Equal(sc.PrevHash, c.PrevHash) || !bytes.Equal(sc.Hash, c.Hash) ||
		sc.Seq != c.Seq || sc.hashStart != c.hashStart || sc.hashEnd != c.hashEnd {
		t.Fatalf("AppendItemLine's CanonicalLine %+v differs from ScanCanonical's %+v", c, sc)
	}
	before, after := c.Canonical()
	canon, _ := e.CanonicalBytes()
	if !bytes.Equal(append(bytes.Clone(before), after...), canon) || string(c.Hash) != e.Hash || c.Seq != e.Seq {
		t.Fatalf("the CanonicalLine does not name the event's canonical bytes, hash and seq")
	}
	return true
}

// TestAppendItemLineAgreesWithDecoding runs random stored events, and
// mutations of their rows, through the row-to-line path and through
// FromItem and CanonicalJSON.
func TestAppendItemLineAgreesWithDecoding(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	r := rand.New(rand.NewPCG(23, 24))
	fast, plain, mutatedFast := 0, 0, 0
	for i := range n {
		e, ok := storedEnvelope(r, i%2 == 0)
		if !ok {
			continue
		}
		it, err := e.ToItem()
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			it[keys.AttrTraceParent] = &types.AttributeValueMemberS{Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
		}
		if checkItemLine(t, it) {
			fast++
		}
		if i%2 == 0 {
			plain++
		}
		for range 5 {
			if checkItemLine(t, mutateItem(r, it)) {
				mutatedFast++
			}
		}
	}
	if fast < plain/2 {
		t.Errorf("the row-to-line path took only %d rows; %d were plain", fast, plain)
	}
	t.Logf("row-to-line path: %d rows (%d plain), %d mutated rows (each checked against decoding)", fast, plain, mutatedFast)
}

// FuzzAppendItemLine checks checkItemLine's property on rows holding fuzzed
// text and numbers: a payload string, a payload member name and a payload
// number, and the same text in the envelope's string attributes, one at a
// time (seed picks which, and the random event around them).
func FuzzAppendItemLine(f *testing.F) {
	f.Add(uint64(1), "plain", "name", "1")
	f.Add(uint64(2), "Zo\u00eb \"q\" \\ \n \x01 \u2028", "é", "-0.5")
	f.Add(uint64(3), "\xed\xa0\x80", "\"", "1e2")
	f.Add(uint64(4), "\xff", "a\\b", "07")
	f.Add(uint64(5), "0190c5a8-7d4e-7c3b-9d1a-2b3c4d5e6f70", "\U0001F600", "123456789012345")
	f.Add(uint64(6), "2026-11-29T19:45:00.5Z", "", "9007199254740993")
	f.Fuzz(func(t *testing.T, seed uint64, text, name, number string) {
		r := rand.New(rand.NewPCG(seed, 25))
		e, ok := storedEnvelope(r, seed%2 == 0)
		if !ok {
			return
		}
		it, err := e.ToItem()
		if err != nil {
			t.Fatal(err)
		}
		attrs := []string{keys.AttrID, keys.AttrType, keys.AttrTenant, keys.AttrOccurredAt, keys.AttrPrevHash,
			keys.AttrHash, keys.AttrActorID, keys.AttrCausationID, keys.AttrCorrelationID}
		switch seed / 2 % 4 {
		case 0:
			it[attrs[seed/8%uint64(len(attrs))]] = &types.AttributeValueMemberS{Value: text}
		case 1:
			attr := keys.AttrSeq
			if seed/8%2 == 0 {
				attr = keys.AttrSchemaVersion
			}
			it[attr] = &types.AttributeValueMemberN{Value: number}
		default:
			p, isM := it[keys.AttrPayload].(*types.AttributeValueMemberM)
			if !isM {
				t.Fatal("ToItem wrote no payload map")
			}
			m := map[string]types.AttributeValue{}
			for k, v := range p.Value {
				m[k] = v
			}
			m[name] = &types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberS{Value: text}, &types.AttributeValueMemberN{Value: number},
				&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{text: &types.AttributeValueMemberNULL{Value: true}}},
			}}
			it[keys.AttrPayload] = &types.AttributeValueMemberM{Value: m}
		}
		checkItemLine(t, it)
	})
}
