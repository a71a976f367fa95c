package chain_test

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// verifyRows walks rows as reconcile does: in place (NextItem) when
// inPlace, decoding a row only when NextItem did not handle it; else
// decoding every row (FromItem + Next). It returns how many rows were
// verified in place and the verdict.
func verifyRows(tenant string, rows []envelope.Item, head *chain.Head, inPlace bool) (int, error) {
	v := chain.NewVerifier(tenant)
	n := 0
	for _, it := range rows {
		if inPlace {
			handled, err := v.NextItem(it)
			if handled {
				n++
				if err != nil {
					return n, err
				}
				continue
			}
		}
		e, err := envelope.FromItem(it)
		if err != nil {
			return n, err
		}
		if err := v.Next(&e); err != nil {
			return n, err
		}
	}
	return n, v.Head(head)
}

// TestNextItemAgreesWithDecoding checks NextItem's verdict on event rows
// against decoding each row: the negative corpus written as rows, and rows
// tampered attribute by attribute.
func TestNextItemAgreesWithDecoding(t *testing.T) {
	evs, head := oddChain(t, 10, 3, 6, 8)
	toRows := func(t *testing.T, evs []envelope.Envelope) ([]envelope.Item, bool) {
		rows := make([]envelope.Item, len(evs))
		for i := range evs {
			it, err := evs[i].ToItem()
			if err != nil {
				return nil, false // not storable: no row to read back
			}
			rows[i] = it
		}
		return rows, true
	}
	rows, _ := toRows(t, evs)
	n, err := verifyRows("acme", rows, head, true)
	if err != nil || n != 9 {
		t.Fatalf("valid rows: %v, %d in place; want nil and 9 (the row with an escape decoded)", err, n)
	}

	same := func(t *testing.T, what string, rows []envelope.Item, h *chain.Head) {
		t.Helper()
		_, fast := verifyRows("acme", rows, h, true)
		_, slow := verifyRows("acme", rows, h, false)
		if verdict(fast) != verdict(slow) {
			t.Fatalf("%s: verdicts differ:\n in place %s\n decoding %s", what, verdict(fast), verdict(slow))
		}
	}
	corpus := 0
	for _, c := range negativeCorpus(t) {
		h := *head
		bad, bh := c.Mutate(clone(evs), &h)
		if rows, ok := toRows(t, bad); ok {
			same(t, c.Name, rows, bh)
			corpus++
		}
	}
	if corpus < 10 {
		t.Errorf("only %d cases of the negative corpus could be written as rows", corpus)
	}

	tampered := []types.AttributeValue{
		&types.AttributeValueMemberS{Value: ""},
		&types.AttributeValueMemberS{Value: "acme"},
		&types.AttributeValueMemberS{Value: "ac\"me"},
		&types.AttributeValueMemberS{Value: "\xed\xa0\x80"},
		&types.AttributeValueMemberS{Value: evs[2].Hash},
		&types.AttributeValueMemberS{Value: evs[2].ID},
		&types.AttributeValueMemberS{Value: "2026-11-29T19:45:00.10Z"},
		&types.AttributeValueMemberN{Value: "3"},
		&types.AttributeValueMemberN{Value: "03"},
		&types.AttributeValueMemberN{Value: "2147483648"},
		&types.AttributeValueMemberN{Value: "9007199254740993"},
		&types.AttributeValueMemberBOOL{Value: true},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"order_id": &types.AttributeValueMemberS{Value: "o-3"}}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"": &types.AttributeValueMemberS{Value: "o-3"}}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a\"b": &types.AttributeValueMemberN{Value: "1"}}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "1.50"}}},
	}
	attrs := []string{keys.AttrTenant, keys.AttrSeq, keys.AttrID, keys.AttrType, keys.AttrOccurredAt, keys.AttrSchemaVersion,
		keys.AttrPayload, keys.AttrPrevHash, keys.AttrHash, keys.AttrActorID, keys.AttrCorrelationID, keys.AttrKind}
	for i := range rows {
		for _, a := range attrs {
			for _, v := range tampered {
				bad := make([]envelope.Item, len(rows))
				copy(bad, rows)
				row := envelope.Item{}
				for k, x := range rows[i] {
					row[k] = x
				}
				row[a] = v
				bad[i] = row
				same(t, "seq "+strconv.Itoa(i+1)+" "+a, bad, head)
			}
			bad := make([]envelope.Item, len(rows))
			copy(bad, rows)
			row := envelope.Item{}
			for k, x := range rows[i] {
				if k != a {
					row[k] = x
				}
			}
			bad[i] = row
			same(t, "seq "+strconv.Itoa(i+1)+" without "+a, bad, head)
		}
	}
}
