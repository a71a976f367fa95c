package eventstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// conflictCounter passes every call through and counts the transactions DynamoDB
// cancelled with a TransactionConflict reason: the path AWS takes when transactions
// race on one item (here, the tenant's head).
type conflictCounter struct {
	eventstore.DynamoDB
	conflicts atomic.Int64
}

func (c *conflictCounter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := c.DynamoDB.TransactWriteItems(ctx, in, o...)
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "TransactionConflict" {
				c.conflicts.Add(1)
				break
			}
		}
	}
	return out, err
}

// With AWS-like conflicts on (Options.Conflicts), 32 × 50 emits of one tenant from four
// independent stores — four processes' worth of clients, so their transactions really
// race on the head — still give seq 1..1600 with no gap and a chain that verifies, and
// the stores met TransactionConflict on the way: the real code path handled it, not a fake.
func TestConcurrentEmitsWithTransactionConflicts(t *testing.T) {
	admin := localaws.DynamoDBProcess(t, "-conflicts", "-conflict-window", "1ms")
	table := localaws.UniqueName(t, "events")
	localaws.CreateTable(t, admin, eventstore.TableSchema(table))

	const stores, writers, each = 4, 8, 50
	var counters []*conflictCounter
	var wg sync.WaitGroup
	errs := make(chan error, stores*writers)
	for range stores {
		c := &conflictCounter{DynamoDB: localaws.NewDynamoDB(aws.ToString(admin.Options().BaseEndpoint))}
		counters = append(counters, c)
		s := mustStore(t, c, eventstore.Config{Table: table, Catalog: catalog, MaxAttempts: 100000, MaxElapsed: 5 * time.Minute})
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := ctxFor("t1")
				for i := range each {
					if _, err := s.Emit(ctx, "order.placed", map[string]any{"n": i}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("emit: %v", err)
	}
	var conflicts int64
	for _, c := range counters {
		conflicts += c.conflicts.Load()
	}
	if conflicts == 0 {
		t.Errorf("no transaction was cancelled with TransactionConflict: the conflict path was not exercised")
	}
	t.Logf("%d transactions cancelled with TransactionConflict on the way to 1600 events", conflicts)

	f := &fixture{db: admin, table: table, store: mustStore(t, admin, eventstore.Config{Table: table, Catalog: catalog})}
	f.verify(t, "t1", stores*writers*each)
}
