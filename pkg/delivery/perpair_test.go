package delivery_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// readRecorder records the partition keys of the state-table items a store
// reads (BatchGetItem and GetItem).
type readRecorder struct {
	*dynamodb.Client
	mu  sync.Mutex
	pks []string
}

func (r *readRecorder) note(k map[string]types.AttributeValue) {
	if s, ok := k[keys.AttrPK].(*types.AttributeValueMemberS); ok {
		r.mu.Lock()
		r.pks = append(r.pks, s.Value)
		r.mu.Unlock()
	}
}

func (r *readRecorder) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	for _, ka := range in.RequestItems {
		for _, k := range ka.Keys {
			r.note(k)
		}
	}
	return r.Client.BatchGetItem(ctx, in, o...)
}

func (r *readRecorder) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.note(in.Key)
	return r.Client.GetItem(ctx, in, o...)
}

// perPairReads counts the recorded reads of per-pair claims and of event
// claim items since the last call.
func (r *readRecorder) take() (perPair, eventItems int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pk := range r.pks {
		switch {
		case strings.HasPrefix(pk, keys.StateEventClaimPrefix):
			eventItems++
		case strings.HasPrefix(pk, keys.StateClaimPrefix):
			perPair++
		}
	}
	r.pks = nil
	return perPair, eventItems
}

// TestWithoutPerPairClaims: once the upgrade window is over, a store made
// WithoutPerPairClaims reads one claim item per event (a prefetch and a
// claim's own read alike) and no per-pair key, and delivers as before; a
// dead letter of the old layout still replays. The test also shows why the
// option waits for the window: a pair completed under the old layout is no
// longer seen, so its handler would run again.
func TestWithoutPerPairClaims(t *testing.T) {
	ctx := context.Background()
	db, table := stateTable(t)
	rec := &readRecorder{Client: db}
	store, err := delivery.NewBatchedStore(delivery.NewDynamoStore(rec, table).WithoutPerPairClaims())
	if err != nil {
		t.Fatal(err)
	}
	rg := newRig(t, store, true)
	const all = "test.first=completed test.second=completed test.third=completed"

	// A fresh event, prefetched (as durable-consumer delivers): one key read.
	e := event(t, "thing.happened", "t1", 1)
	p, _, err := rg.d.Prefetch(ctx, []envelope.Envelope{e})
	if err != nil {
		t.Fatal(err)
	}
	if perPair, items := rec.take(); perPair != 0 || items != 1 {
		t.Errorf("prefetch read %d per-pair claims and %d claim items; want 0 and 1", perPair, items)
	}
	res, err := rg.d.DeliverWith(ctx, e, p)
	if err != nil || outcomes(res) != all {
		t.Fatalf("delivery: %s, %v; want %s", outcomes(res), err, all)
	}
	// Another, message by message (as dlq-repair delivers): the claim reads
	// the item itself, again without per-pair keys.
	e2 := event(t, "thing.happened", "t1", 1)
	rec.take()
	if res, err := rg.d.Deliver(ctx, e2); err != nil || outcomes(res) != all {
		t.Fatalf("delivery without a prefetch: %s, %v; want %s", outcomes(res), err, all)
	}
	if perPair, _ := rec.take(); perPair != 0 {
		t.Errorf("a claim without a prefetch read %d per-pair claims; want 0", perPair)
	}

	// A dead letter of the old layout replays (the replay reads its claim).
	e3 := event(t, "thing.happened", "t1", 1)
	now := rg.now.Now()
	putLegacy(t, db, table, delivery.Key{EventID: e3.ID, Subscription: "test.second"}, keys.ClaimDead, now.Add(-time.Hour))
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		keys.AttrPK: sAttr(keys.StateDeadPrefix + "t1"), keys.AttrSK: sAttr(e3.ID + ":test.second"),
		keys.AttrTenant: sAttr("t1"), keys.AttrID: sAttr(e3.ID), keys.AttrSubscription: sAttr("test.second"),
		keys.AttrType: sAttr(e3.Type), keys.AttrSeq: nAttr(1), keys.AttrSchemaVersion: nAttr(1), keys.AttrError: sAttr("old failure"),
	}}); err != nil {
		t.Fatal(err)
	}
	if sr, err := rg.d.Replay(ctx, e3, "test.second"); err != nil || sr.Outcome != delivery.Completed {
		t.Fatalf("replay of an old-layout dead letter: %+v %v; want completed", sr, err)
	}

	// Why the option waits: a pair completed under the old layout is not
	// seen, and its handler runs again.
	e4 := event(t, "thing.happened", "t1", 1)
	putLegacy(t, db, table, delivery.Key{EventID: e4.ID, Subscription: "test.first"}, keys.ClaimCompleted, now.Add(-time.Hour))
	before := rg.r.count("test.first")
	if res, err := rg.d.Deliver(ctx, e4); err != nil || outcomes(res) != all {
		t.Fatalf("delivery over an old completed pair: %s, %v", outcomes(res), err)
	}
	if got := rg.r.count("test.first") - before; got != 1 {
		t.Errorf("test.first ran %d times over its old completed claim; want 1 (the option is for after the upgrade window)", got)
	}
}

// TestPerPairClaimsSetting: the environment's setting picks the store, and a
// value it does not know stops the function naming the variable.
func TestPerPairClaimsSetting(t *testing.T) {
	d := delivery.NewDynamoStore(nil, "state")
	for _, v := range []string{"", keys.PerPairClaimsRead, keys.PerPairClaimsGone} {
		if got, err := d.PerPairClaims(v); err != nil || got == nil {
			t.Errorf("PerPairClaims(%q): %v, %v", v, got, err)
		}
	}
	if got, _ := d.PerPairClaims(""); got != d {
		t.Error(`PerPairClaims(""): want the store itself (per-pair claims read, the default)`)
	}
	if got, _ := d.PerPairClaims(keys.PerPairClaimsGone); got == d {
		t.Error("PerPairClaims(gone): want a copy without per-pair reads")
	}
	_, err := d.PerPairClaims("off")
	if err == nil || !strings.Contains(err.Error(), keys.EnvPerPairClaims) || !strings.Contains(err.Error(), `"gone"`) {
		t.Errorf(`PerPairClaims("off"): %v; want an error naming %s and its values`, err, keys.EnvPerPairClaims)
	}
}

// unanswering leaves the claim items of one event unanswered in every
// BatchGetItem (UnprocessedKeys), as a throttled table does.
type unanswering struct {
	*dynamodb.Client
	eventID string
}

func (u *unanswering) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	req := map[string]types.KeysAndAttributes{}
	left := map[string]types.KeysAndAttributes{}
	for table, ka := range in.RequestItems {
		for _, k := range ka.Keys {
			pk, _ := k[keys.AttrPK].(*types.AttributeValueMemberS)
			dst := req
			if pk != nil && strings.Contains(pk.Value, u.eventID) {
				dst = left
			}
			e := dst[table]
			e.Keys, e.ConsistentRead = append(e.Keys, k), ka.ConsistentRead
			dst[table] = e
		}
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	if len(req) > 0 {
		var err error
		if out, err = u.Client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req}, o...); err != nil {
			return nil, err
		}
	}
	out.UnprocessedKeys = left
	return out, nil
}

// TestUnansweredClaimsAreNotRead: a claim DynamoDB never answered (left in
// UnprocessedKeys through every retry) is missing from what ReadBatch read,
// so delivery claims it with its own read instead of taking it as absent;
// the claims it did answer are read, found or not.
func TestUnansweredClaimsAreNotRead(t *testing.T) {
	for _, perPairGone := range []bool{false, true} {
		db, table := stateTable(t)
		victim, other := event(t, "thing.happened", "t1", 1), event(t, "thing.happened", "t1", 1)
		d := delivery.NewDynamoStore(&unanswering{Client: db, eventID: victim.ID}, table)
		if perPairGone {
			d = d.WithoutPerPairClaims()
		}
		kv, ko := delivery.Key{EventID: victim.ID, Subscription: "test.first"}, delivery.Key{EventID: other.ID, Subscription: "test.first"}
		got, _, err := d.ReadBatch(context.Background(), []delivery.Key{kv, ko}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got[kv]; ok {
			t.Errorf("perPairGone=%v: the unanswered claim is in the answer (%+v); want it left out as not read", perPairGone, got[kv])
		}
		if r, ok := got[ko]; !ok || r.Found() {
			t.Errorf("perPairGone=%v: the answered claim: %+v (in the answer: %v); want it read and absent", perPairGone, r, ok)
		}
	}
}
