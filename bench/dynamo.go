package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// uniqueName is a table name no other run sharing the server uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("bench-%s-%012x", prefix, rand.Uint64()>>16)
}

// createTable creates in (with a unique name when unset) and waits until it
// is active; drop deletes it.
func createTable(ctx context.Context, db *dynamodb.Client, in *dynamodb.CreateTableInput) (name string, drop func(), err error) {
	input := *in
	if input.TableName == nil {
		input.TableName = aws.String(uniqueName("tbl"))
	}
	if input.BillingMode == "" && input.ProvisionedThroughput == nil {
		input.BillingMode = types.BillingModePayPerRequest
	}
	name = *input.TableName
	if _, err := db.CreateTable(ctx, &input); err != nil {
		return "", nil, fmt.Errorf("create table %s: %w", name, err)
	}
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	}
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 500*time.Millisecond
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		drop()
		return "", nil, fmt.Errorf("wait for table %s: %w", name, err)
	}
	return name, drop, nil
}

// itemBytes is an item's size as DynamoDB bills it (eventstore.ItemSize).
func itemBytes(it map[string]types.AttributeValue) int { return eventstore.ItemSize(it) }

// writeUnits is the model cost of one transactional write of an item of n
// bytes on AWS: 2 WCU per started KB.
func writeUnits(n int) float64 { return 2 * float64((n+1023)/1024) }

// countingDB wraps the client the code under test uses and counts what it
// sends, so a bench can report calls, writes and a model WCU from the real
// item sizes, independent of what the server reports as ConsumedCapacity.
type countingDB struct {
	*dynamodb.Client

	mu sync.Mutex
	counters
}

// counters are what countingDB counted.
type counters struct {
	transactOK      int64   // TransactWriteItems calls that succeeded
	transactFail    int64   // ... that failed
	transactItems   int64   // write actions (Put, Update, Delete) in successful transactions
	conditionChecks int64   // ConditionCheck actions in successful transactions
	refused         int64   // PutItem / UpdateItem / DeleteItem refused by their condition
	puts, updates   int64   // successful PutItem / UpdateItem calls
	deletes         int64   // successful DeleteItem calls
	batchWrites     int64   // items written by successful BatchWriteItem calls
	modelWCU        float64 // AWS model for the successful transactional Puts
	localWCU        float64 // what the local DynamoDB reported (when asked)
	gets, queries   int64   // GetItem / Query calls
	getItems        int64   // items GetItem found
	queryItems      int64   // items Query returned
	scans           int64
	scanItems       int64
	batchGets       int64 // BatchGetItem calls
	batchGetKeys    int64 // keys they asked for
	batchGetItems   int64 // items they returned
	maxItemBytes    int   // largest item put, for the tables
	minItemBytes    int   // smallest event row put
}

func (c *countingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := c.Client.TransactWriteItems(ctx, in, optFns...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.transactFail++
		return out, err
	}
	c.transactOK++
	for _, x := range in.TransactItems {
		switch {
		case x.Put != nil:
			c.transactItems++
			n := itemBytes(x.Put.Item)
			c.modelWCU += writeUnits(n)
			c.maxItemBytes = max(c.maxItemBytes, n)
			if _, isEvent := x.Put.Item["payload"]; isEvent && (c.minItemBytes == 0 || n < c.minItemBytes) {
				c.minItemBytes = n
			}
		case x.Update != nil, x.Delete != nil:
			c.transactItems++ // sizes unknown here: no model WCU
		case x.ConditionCheck != nil:
			c.conditionChecks++
		}
	}
	for _, cc := range out.ConsumedCapacity {
		if cc.CapacityUnits != nil {
			c.localWCU += *cc.CapacityUnits
		}
	}
	return out, nil
}

func (c *countingDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.Client.PutItem(ctx, in, optFns...)
	c.count(err, &c.puts)
	return out, err
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.Client.UpdateItem(ctx, in, optFns...)
	c.count(err, &c.updates)
	return out, err
}

func (c *countingDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := c.Client.DeleteItem(ctx, in, optFns...)
	c.count(err, &c.deletes)
	return out, err
}

// count adds one to *n on success, to refused on a failed condition.
func (c *countingDB) count(err error, n *int64) {
	var ccf *types.ConditionalCheckFailedException
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		*n++
	case errors.As(err, &ccf):
		c.refused++
	}
}

func (c *countingDB) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	out, err := c.Client.BatchWriteItem(ctx, in, optFns...)
	if err == nil {
		n := 0
		for _, reqs := range in.RequestItems {
			n += len(reqs)
		}
		for _, reqs := range out.UnprocessedItems {
			n -= len(reqs)
		}
		c.mu.Lock()
		c.batchWrites += int64(n)
		c.mu.Unlock()
	}
	return out, err
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.Client.GetItem(ctx, in, optFns...)
	c.mu.Lock()
	c.gets++
	if err == nil && out.Item != nil {
		c.getItems++
	}
	c.mu.Unlock()
	return out, err
}

func (c *countingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := c.Client.BatchGetItem(ctx, in, optFns...)
	c.mu.Lock()
	c.batchGets++
	for _, ka := range in.RequestItems {
		c.batchGetKeys += int64(len(ka.Keys))
	}
	if err == nil {
		for _, items := range out.Responses {
			c.batchGetItems += int64(len(items))
		}
	}
	c.mu.Unlock()
	return out, err
}

func (c *countingDB) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.Client.Query(ctx, in, optFns...)
	c.mu.Lock()
	c.queries++
	if err == nil {
		c.queryItems += int64(out.Count)
	}
	c.mu.Unlock()
	return out, err
}

func (c *countingDB) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := c.Client.Scan(ctx, in, optFns...)
	c.mu.Lock()
	c.scans++
	if err == nil {
		c.scanItems += int64(out.Count)
	}
	c.mu.Unlock()
	return out, err
}

// snapshot copies the counters.
func (c *countingDB) snapshot() counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counters
}

// writes is the number of item writes that succeeded, however sent.
func (c counters) writes() int64 {
	return c.transactItems + c.puts + c.updates + c.deletes + c.batchWrites
}
