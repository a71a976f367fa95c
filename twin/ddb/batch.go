package ddb

import (
	"context"
	"sort"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// BatchGetItem and BatchWriteItem.
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html
//
// Each table is read or written under its own lock; each item is atomic, the batch is
// not (as on AWS). A write throttled by its partition's budget (Options.PartitionWCU),
// or meeting an item an in-flight transaction holds, is returned in UnprocessedItems
// (our choice for the conflict: AWS documents UnprocessedItems for throttling and
// internal failures); when nothing could be written for throttling, the whole call is
// ProvisionedThroughputExceededException, as AWS documents.

func init() {
	register(targetDynamoDB+"BatchGetItem", opBatchGetItem)
	register(targetDynamoDB+"BatchWriteItem", opBatchWriteItem)
}

type batchGetTableJSON struct {
	Keys                 []attr.Item
	ProjectionExpression *string `json:",omitempty"`
	ConsistentRead       bool    `json:",omitempty"`
	exprParams
	legacyParams
}

type batchGetInput struct {
	RequestItems           map[string]*batchGetTableJSON
	ReturnConsumedCapacity string
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func opBatchGetItem(ctx context.Context, db *DB, body []byte) (any, error) {
	var in batchGetInput
	if err := decodeInput(body, &in); err != nil {
		return nil, err
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if len(in.RequestItems) == 0 {
		return nil, validationf("1 validation error detected: Value null at 'requestItems' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	names := sortedNames(in.RequestItems)
	total := 0
	tables := map[string]*Table{}
	for _, name := range names {
		rt := in.RequestItems[name]
		if rt == nil || len(rt.Keys) == 0 {
			return nil, validationf("1 validation error detected: Value at 'requestItems.%s.member.keys' failed to satisfy constraint: Member must have length greater than or equal to 1", name)
		}
		if err := rt.legacyParams.check(); err != nil {
			return nil, err
		}
		total += len(rt.Keys)
		if total > maxBatchGetKeys {
			return nil, validationf("Too many items requested for the BatchGetItem call")
		}
		t, err := db.table(name)
		if err != nil {
			return nil, err
		}
		tables[name] = t
		seen := map[string]bool{}
		for _, k := range rt.Keys {
			if err := t.validateKey(k); err != nil {
				return nil, err
			}
			ks := keyString(t.keyOf(k))
			if seen[ks] {
				return nil, validationf("Provided list of item keys contains duplicates")
			}
			seen[ks] = true
		}
	}
	if err := db.injectedFault(ctx, names...); err != nil {
		return nil, err
	}
	responses := map[string][]attr.Item{}
	unprocessed := map[string]*batchGetTableJSON{}
	cs := &capacities{}
	bytes := 0
	for _, name := range names {
		rt, t := in.RequestItems[name], tables[name]
		p, err := rt.params()
		if err != nil {
			return nil, err
		}
		pr, err := parseProjection(rt.ProjectionExpression, p)
		if err != nil {
			return nil, err
		}
		if err := p.CheckUnused(); err != nil {
			return nil, exprError(err)
		}
		c := cs.of(name, false)
		got := []attr.Item{}
		t.mu.RLock()
		if t.deleted {
			t.mu.RUnlock()
			return nil, notFoundf("Requested resource not found: Table: %s not found", t.Name)
		}
		for i, k := range rt.Keys {
			item := t.getLocked(k)
			size := sizeOf(item)
			if bytes+size > maxBatchGetBytes {
				// The response is full: the rest waits for the caller's next call.
				rest := *rt
				rest.Keys = rt.Keys[i:]
				unprocessed[name] = &rest
				break
			}
			bytes += size
			c.units += readUnits(size, rt.ConsistentRead) // each item rounded up on its own
			if item != nil {
				got = append(got, project(pr, item))
			}
		}
		t.mu.RUnlock()
		responses[name] = got
	}
	out := map[string]any{"Responses": responses, "UnprocessedKeys": unprocessed}
	if r := cs.report(in.ReturnConsumedCapacity); r != nil {
		out["ConsumedCapacity"] = r
	}
	return out, nil
}

type putRequestJSON struct {
	Item attr.Item
}

type deleteRequestJSON struct {
	Key attr.Item
}

type writeRequestJSON struct {
	PutRequest    *putRequestJSON    `json:",omitempty"`
	DeleteRequest *deleteRequestJSON `json:",omitempty"`
}

type batchWriteInput struct {
	RequestItems                map[string][]writeRequestJSON
	ReturnConsumedCapacity      string
	ReturnItemCollectionMetrics string
}

func opBatchWriteItem(ctx context.Context, db *DB, body []byte) (any, error) {
	var in batchWriteInput
	if err := decodeInput(body, &in); err != nil {
		return nil, err
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if err := checkEnum("returnItemCollectionMetrics", in.ReturnItemCollectionMetrics, "SIZE", "NONE"); err != nil {
		return nil, err
	}
	if len(in.RequestItems) == 0 {
		return nil, validationf("1 validation error detected: Value null at 'requestItems' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	names := sortedNames(in.RequestItems)
	tables := map[string]*Table{}
	var list []*Table
	total := 0
	for _, name := range names {
		reqs := in.RequestItems[name]
		if len(reqs) == 0 {
			return nil, validationf("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to 25, Member must have length greater than or equal to 1]")
		}
		total += len(reqs)
		if total > maxBatchWrites {
			return nil, validationf("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to 25, Member must have length greater than or equal to 1]")
		}
		t, err := db.table(name)
		if err != nil {
			return nil, err
		}
		tables[name] = t
		list = append(list, t)
		seen := map[string]bool{}
		for _, r := range reqs {
			var key attr.Item
			switch {
			case r.PutRequest != nil && r.DeleteRequest == nil:
				if r.PutRequest.Item == nil {
					return nil, validationf("1 validation error detected: Value null at 'requestItems.%s.member.putRequest.item' failed to satisfy constraint: Member must not be null", name)
				}
				if err := t.validateItem(r.PutRequest.Item, false); err != nil {
					return nil, err
				}
				key = t.KeyItem(r.PutRequest.Item)
			case r.DeleteRequest != nil && r.PutRequest == nil:
				if err := t.validateKey(r.DeleteRequest.Key); err != nil {
					return nil, err
				}
				key = r.DeleteRequest.Key
			default:
				return nil, validationf("Each WriteRequest must contain exactly one of PutRequest or DeleteRequest")
			}
			ks := keyString(t.keyOf(key))
			if seen[ks] {
				return nil, validationf("Provided list of item keys contains duplicates")
			}
			seen[ks] = true
		}
	}
	if err := db.injectedFault(ctx, names...); err != nil {
		return nil, err
	}
	unprocessed := map[string][]writeRequestJSON{}
	cs := &capacities{}
	written, throttled := 0, 0
	j := db.begin()
	unlock := lockTables(list)
	if err := checkLive(list); err != nil {
		db.commit(j)
		unlock()
		return nil, err
	}
	now := db.now()
	for _, name := range names {
		t := tables[name]
		c := cs.of(name, true)
		for _, r := range in.RequestItems[name] {
			var key, item attr.Item
			if r.PutRequest != nil {
				item = r.PutRequest.Item
				key = t.KeyItem(item)
			} else {
				key = r.DeleteRequest.Key
			}
			hk, rk := t.keyOf(key)
			if t.extra.inflight[keyString(hk, rk)] != nil {
				unprocessed[name] = append(unprocessed[name], r)
				continue
			}
			old := t.getLocked(key)
			var one capacity
			one.addWrite(t, old, item, 1)
			if !db.takeBudget(t, hk, one.units) {
				unprocessed[name] = append(unprocessed[name], r)
				throttled++
				continue
			}
			c.addWrite(t, old, item, 1)
			t.writeLocked(key, item, nil, now, j)
			written++
		}
	}
	err := db.commit(j)
	unlock()
	if err != nil {
		return nil, err
	}
	if written == 0 && throttled == total {
		return nil, throughputExceeded()
	}
	out := map[string]any{"UnprocessedItems": unprocessed}
	if r := cs.report(in.ReturnConsumedCapacity); r != nil {
		out["ConsumedCapacity"] = r
	}
	return out, nil
}
