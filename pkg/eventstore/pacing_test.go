package eventstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// headDB is one chain's head and nothing else: a transaction commits when
// its head Put expects the seq the head is at, and otherwise is cancelled
// with the head returned (ALL_OLD), as DynamoDB does. When raced is set,
// another writer commits just before the next call is served.
type headDB struct {
	scriptedDB // the calls the test does not look at

	mu      sync.Mutex
	seq     int64
	raced   bool
	reads   int
	writes  []int64     // the seq each transaction expected the head at
	onWrite func(n int) // before the n-th transaction (from 1) is served
}

var _ eventstore.DynamoDB = (*headDB)(nil)

func (d *headDB) headItem() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		keys.AttrTenant:      &types.AttributeValueMemberS{Value: "t1"},
		keys.AttrSeq:         &types.AttributeValueMemberN{Value: strconv.Itoa(keys.HeadSeq)},
		keys.AttrKind:        &types.AttributeValueMemberS{Value: keys.KindHead},
		keys.AttrLastSeq:     &types.AttributeValueMemberN{Value: strconv.FormatInt(d.seq, 10)},
		keys.AttrLastHash:    &types.AttributeValueMemberS{Value: fmt.Sprintf("%064x", d.seq)},
		keys.AttrLastEventID: &types.AttributeValueMemberS{Value: fmt.Sprintf("0190f5a4-0000-7000-8000-%012x", d.seq)},
	}
}

// race lets the other writer commit if it is due.
func (d *headDB) race() {
	if d.raced {
		d.raced = false
		d.seq++
	}
}

func (d *headDB) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.race()
	d.reads++
	return &dynamodb.GetItemOutput{Item: d.headItem()}, nil
}

func (d *headDB) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.race()
	if d.onWrite != nil {
		d.onWrite(len(d.writes) + 1)
	}
	head := in.TransactItems[0].Put
	want, _ := strconv.ParseInt(head.ExpressionAttributeValues[":l"].(*types.AttributeValueMemberN).Value, 10, 64)
	d.writes = append(d.writes, want)
	if want != d.seq {
		rs := make([]types.CancellationReason, len(in.TransactItems))
		for i := range rs {
			rs[i].Code = aws.String("None")
		}
		rs[0] = types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Item: d.headItem()}
		return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: rs}
	}
	d.seq, _ = strconv.ParseInt(head.Item[keys.AttrLastSeq].(*types.AttributeValueMemberN).Value, 10, 64)
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// TestRetryAfterBackoffReadsHead: a batch that lost a race to another writer
// and waited out its backoff reads the head before it tries again, instead of
// sending a write sealed on the head its loss returned, which the commits
// landed during the wait have made stale: that write could only fail.
func TestRetryAfterBackoffReadsHead(t *testing.T) {
	db := &headDB{seq: 4}
	db.onWrite = func(n int) {
		if n == 1 {
			db.seq++        // another writer commits seq 5 first: this one loses
			db.raced = true // and seq 6 while this one backs off
		}
	}
	// A backoff window of 20 ms, far above this fake's round trips.
	s := mustStore(t, db, eventstore.Config{Table: "events", Catalog: catalog, BaseDelay: 20 * time.Millisecond, MaxDelay: 20 * time.Millisecond})
	e, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{})
	if err != nil {
		t.Fatalf("emit: %v", err)
	}
	if e.Seq != 7 {
		t.Errorf("committed at seq %d, want 7", e.Seq)
	}
	// Read, write on 4 (lost to 5), read (6), write on 6.
	if want := []int64{4, 6}; len(db.writes) != len(want) || db.writes[0] != want[0] || db.writes[1] != want[1] {
		t.Errorf("transactions expected the head at %v, want %v (no write sealed on the stale seq 5)", db.writes, want)
	}
	if db.reads != 2 {
		t.Errorf("%d head reads, want 2 (the first seal's and the retry's)", db.reads)
	}
	if st := s.Stats(); st.FailedAttempts != 1 {
		t.Errorf("failed attempts: got %d, want 1", st.FailedAttempts)
	}
}
