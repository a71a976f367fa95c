package ddb_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// The server's item size (attr.Item.Size, behind its consumed capacity) and the bench's
// WCU model (eventstore.ItemSize) are two copies of AWS's size rule, kept apart because
// the framework must not import the twin; `make bench` reports one beside the other, so
// they must agree exactly. This test holds them to it on random items.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html

// TestItemSizeMatchesEventstoreModel compares the two on random items of every type,
// nested, with numbers of many digit shapes: once on the SDK form of the stored
// (canonical) item, and once on the texts a client would send, which is what the bench's
// model sees while the server counts the canonical form.
func TestItemSizeMatchesEventstoreModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2026))
	for i := range 5000 {
		g := &itemGen{rng: rng}
		item, sent := g.item()
		got := item.Size()
		if want := eventstore.ItemSize(toSDKItem(item)); got != want {
			t.Fatalf("item %d: attr.Item.Size = %d, eventstore.ItemSize of the same item = %d\nitem: %s", i, got, want, mustJSON(item))
		}
		if want := eventstore.ItemSize(sent); got != want {
			t.Fatalf("item %d: attr.Item.Size = %d, eventstore.ItemSize of the texts sent = %d\nitem: %s", i, got, want, mustJSON(item))
		}
	}
}

// TestItemSizeNumberShapes checks one number at a time, so a disagreement names the text.
func TestItemSizeNumberShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 2026))
	texts := []string{"0", "-0", "0.0", "00", "0e5", "0.000e-3", "1", "10", "100", "-100", "1e2", "1E+2", "0.01", ".5", "5.", "1.50", "-0.0012300", "123456789012345678901234567890123456780", "9.9999999999999999999999999999999999999E+125", "1E-130", "-1e-130"}
	g := &itemGen{rng: rng}
	for range 3000 {
		texts = append(texts, g.numberText())
	}
	n := 0
	for _, s := range texts {
		canon, _, err := attr.ParseNumber(s)
		if err != nil {
			continue // DynamoDB refuses it; neither side ever sizes it
		}
		n++
		got := attr.Item{"n": attr.Num(canon)}.Size()
		for _, text := range []string{canon, s} {
			if want := eventstore.ItemSize(map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: text}}); got != want {
				t.Errorf("number %q (canonical %q): attr size %d, eventstore.ItemSize of %q %d", s, canon, got, text, want)
			}
		}
	}
	if n < len(texts)*9/10 {
		t.Fatalf("only %d of %d number texts parsed: the generator makes too few valid numbers", n, len(texts))
	}
}

// itemGen makes random items; each value comes with the SDK form of the texts sent.
type itemGen struct {
	rng   *rand.Rand
	depth int
}

func (g *itemGen) item() (attr.Item, map[string]types.AttributeValue) {
	it, sent := attr.Item{}, map[string]types.AttributeValue{}
	for range 1 + g.rng.IntN(8) {
		k := g.str(1 + g.rng.IntN(12))
		it[k], sent[k] = g.value()
	}
	return it, sent
}

func (g *itemGen) value() (*attr.Value, types.AttributeValue) {
	kinds := 10
	if g.depth >= 4 {
		kinds = 8 // scalars and sets only, so nesting ends
	}
	switch g.rng.IntN(kinds) {
	case 0:
		return sameSent(attr.Str(g.str(g.rng.IntN(40))))
	case 1:
		canon, text := g.number()
		return attr.Num(canon), &types.AttributeValueMemberN{Value: text}
	case 2:
		return sameSent(attr.Bin(g.bytes()))
	case 3:
		return sameSent(attr.Boolean(g.rng.IntN(2) == 0))
	case 4:
		return sameSent(attr.Null())
	case 5:
		var members []string
		seen := map[string]bool{}
		for range 1 + g.rng.IntN(5) {
			if s := g.str(g.rng.IntN(20)); !seen[s] {
				seen[s] = true
				members = append(members, s)
			}
		}
		return sameSent(&attr.Value{Kind: attr.KindSS, SS: members})
	case 6:
		var canons, texts []string
		seen := map[string]bool{}
		for range 1 + g.rng.IntN(5) {
			if canon, text := g.number(); !seen[canon] {
				seen[canon] = true
				canons, texts = append(canons, canon), append(texts, text)
			}
		}
		return &attr.Value{Kind: attr.KindNS, SS: canons}, &types.AttributeValueMemberNS{Value: texts}
	case 7:
		var members [][]byte
		for range 1 + g.rng.IntN(5) {
			members = append(members, g.bytes())
		}
		return sameSent(&attr.Value{Kind: attr.KindBS, BS: members})
	case 8:
		g.depth++
		defer func() { g.depth-- }()
		var l []*attr.Value
		var sent []types.AttributeValue
		for range g.rng.IntN(5) {
			v, s := g.value()
			l, sent = append(l, v), append(sent, s)
		}
		return attr.List(l), &types.AttributeValueMemberL{Value: sent}
	default:
		g.depth++
		defer func() { g.depth-- }()
		m, sent := map[string]*attr.Value{}, map[string]types.AttributeValue{}
		for range g.rng.IntN(5) {
			k := g.str(g.rng.IntN(10))
			m[k], sent[k] = g.value()
		}
		return attr.Map(m), &types.AttributeValueMemberM{Value: sent}
	}
}

// sameSent pairs a value whose text is sent as stored (all but numbers) with its SDK form.
func sameSent(v *attr.Value) (*attr.Value, types.AttributeValue) { return v, toSDK(v) }

// str is n runes of ASCII, two-, three- and four-byte UTF-8.
func (g *itemGen) str(n int) string {
	alphabet := []rune("az09_-.é中𝄞")
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[g.rng.IntN(len(alphabet))])
	}
	return b.String()
}

func (g *itemGen) bytes() []byte {
	b := make([]byte, 1+g.rng.IntN(30))
	for i := range b {
		b[i] = byte(g.rng.IntN(256))
	}
	return b
}

// number returns a valid number's canonical text (as stored) and the text sent.
func (g *itemGen) number() (canon, text string) {
	for {
		text = g.numberText()
		if c, _, err := attr.ParseNumber(text); err == nil {
			return c, text
		}
	}
}

// numberText is a number in one of many shapes: sign or none, leading zeros, 0 to 40
// digits before and after a point (zeros inside and at the ends), and an exponent.
func (g *itemGen) numberText() string {
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			if g.rng.IntN(3) == 0 {
				b.WriteByte('0')
			} else {
				b.WriteByte(byte('0' + g.rng.IntN(10)))
			}
		}
		return b.String()
	}
	var b strings.Builder
	switch g.rng.IntN(4) {
	case 0:
		b.WriteByte('-')
	case 1:
		if g.rng.IntN(4) == 0 {
			b.WriteByte('+')
		}
	}
	b.WriteString(strings.Repeat("0", g.rng.IntN(3)))
	intPart := digits(g.rng.IntN(20))
	if g.rng.IntN(4) == 0 {
		intPart = digits(20 + g.rng.IntN(20))
	}
	b.WriteString(intPart)
	frac := ""
	if g.rng.IntN(2) == 0 {
		frac = digits(g.rng.IntN(20)) + strings.Repeat("0", g.rng.IntN(4))
		b.WriteString("." + frac)
	}
	if intPart == "" && frac == "" {
		b.WriteString(fmt.Sprint(g.rng.IntN(10)))
	}
	if g.rng.IntN(4) == 0 {
		b.WriteString([]string{"e", "E", "e+", "E-", "e-"}[g.rng.IntN(5)])
		b.WriteString(fmt.Sprint(g.rng.IntN(60)))
	}
	return b.String()
}

// toSDKItem converts a stored item to the SDK's AttributeValues, texts as stored.
func toSDKItem(it attr.Item) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(it))
	for k, v := range it {
		out[k] = toSDK(v)
	}
	return out
}

func toSDK(v *attr.Value) types.AttributeValue {
	switch v.Kind {
	case attr.KindS:
		return &types.AttributeValueMemberS{Value: v.S}
	case attr.KindN:
		return &types.AttributeValueMemberN{Value: v.S}
	case attr.KindB:
		return &types.AttributeValueMemberB{Value: v.B}
	case attr.KindBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Bool}
	case attr.KindNULL:
		return &types.AttributeValueMemberNULL{Value: true}
	case attr.KindSS:
		return &types.AttributeValueMemberSS{Value: v.SS}
	case attr.KindNS:
		return &types.AttributeValueMemberNS{Value: v.SS}
	case attr.KindBS:
		return &types.AttributeValueMemberBS{Value: v.BS}
	case attr.KindL:
		l := make([]types.AttributeValue, len(v.L))
		for i, e := range v.L {
			l[i] = toSDK(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case attr.KindM:
		return &types.AttributeValueMemberM{Value: toSDKItem(attr.Item(v.M))}
	}
	panic(fmt.Sprintf("toSDK: kind %v", v.Kind))
}

func mustJSON(it attr.Item) string {
	b, err := it.MarshalJSON()
	if err != nil {
		return err.Error()
	}
	return string(b)
}
