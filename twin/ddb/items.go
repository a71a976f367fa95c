package ddb

import (
	"context"
	"net/http"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
	"github.com/fourlanes/fourlanes/twin/ddb/expr"
)

// The single-item operations: PutItem, GetItem, UpdateItem, DeleteItem.
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html

func init() {
	register(targetDynamoDB+"PutItem", opPutItem)
	register(targetDynamoDB+"GetItem", opGetItem)
	register(targetDynamoDB+"UpdateItem", opUpdateItem)
	register(targetDynamoDB+"DeleteItem", opDeleteItem)
}

type writeCommon struct {
	TableName                           string
	ConditionExpression                 *string
	ReturnValues                        string
	ReturnConsumedCapacity              string
	ReturnItemCollectionMetrics         string
	ReturnValuesOnConditionCheckFailure string
	exprParams
	legacyParams
}

// prepare checks what every single-item write shares and parses its condition.
func (w *writeCommon) prepare(db *DB, p *expr.Params) (*Table, *expr.Condition, error) {
	if err := w.legacyParams.check(); err != nil {
		return nil, nil, err
	}
	if err := checkReturnConsumed(w.ReturnConsumedCapacity); err != nil {
		return nil, nil, err
	}
	if err := checkEnum("returnValuesOnConditionCheckFailure", w.ReturnValuesOnConditionCheckFailure, "ALL_OLD", "NONE"); err != nil {
		return nil, nil, err
	}
	if err := checkEnum("returnItemCollectionMetrics", w.ReturnItemCollectionMetrics, "SIZE", "NONE"); err != nil {
		return nil, nil, err
	}
	t, err := db.table(w.TableName)
	if err != nil {
		return nil, nil, err
	}
	var cond *expr.Condition
	if w.ConditionExpression != nil {
		cond, err = expr.ParseCondition(*w.ConditionExpression, "ConditionExpression", p)
		if err != nil {
			return nil, nil, exprError(err)
		}
	}
	return t, cond, nil
}

// start checks what every single-item write shares, in AWS's order: ReturnValues (only
// ALL_OLD or NONE when allOldOnly: PutItem, DeleteItem), the legacy and expression
// parameters, the condition, then what the operation parses itself (parse, may be nil),
// and last that every expression name and value is used.
func (w *writeCommon) start(db *DB, allOldOnly bool, parse func(*Table, *expr.Params) error) (*Table, *expr.Condition, error) {
	if err := checkEnum("returnValues", w.ReturnValues, "NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"); err != nil {
		return nil, nil, err
	}
	if allOldOnly && w.ReturnValues != "" && w.ReturnValues != "NONE" && w.ReturnValues != "ALL_OLD" {
		return nil, nil, validationf("ReturnValues can only be ALL_OLD or NONE")
	}
	p, err := w.params()
	if err != nil {
		return nil, nil, err
	}
	t, cond, err := w.prepare(db, p)
	if err != nil {
		return nil, nil, err
	}
	if parse != nil {
		if err := parse(t, p); err != nil {
			return nil, nil, err
		}
	}
	if err := p.CheckUnused(); err != nil {
		return nil, nil, exprError(err)
	}
	return t, cond, nil
}

// runWriteOld runs w and answers as PutItem and DeleteItem do: the old item only for
// ReturnValues ALL_OLD.
func (db *DB) runWriteOld(ctx context.Context, w *singleWrite, c *writeCommon) (any, error) {
	old, _, err := db.runWrite(ctx, w)
	if err != nil {
		return nil, err
	}
	if c.ReturnValues != "ALL_OLD" {
		old = nil
	}
	return writeOutput(old, &w.capacity, c.ReturnConsumedCapacity), nil
}

// singleWrite is one item's read-check-write, done under the table's write lock.
type singleWrite struct {
	t        *Table
	key      attr.Item
	cond     *expr.Condition
	failOld  string                                 // ReturnValuesOnConditionCheckFailure
	next     func(old attr.Item) (attr.Item, error) // the item to store (nil deletes)
	capacity capacity
}

// run applies w: a transaction holding the item → TransactionConflictException; a
// failed condition → ConditionalCheckFailedException; an exhausted partition budget →
// ProvisionedThroughputExceededException. It returns the old and new item.
func (db *DB) runWrite(ctx context.Context, w *singleWrite) (old, item attr.Item, err error) {
	if err := db.injectedFault(ctx, w.t.Name); err != nil {
		return nil, nil, err
	}
	w.capacity = capacity{table: w.t.Name, write: true}
	t := w.t
	j := db.begin()
	unlock := lockTables([]*Table{t})
	defer unlock()
	defer func() { db.commit(j) }() // releases the journal on every return; the write commits first
	if t.deleted {
		return nil, nil, notFoundf("Requested resource not found: Table: %s not found", t.Name)
	}
	hk, rk := t.keyOf(w.key)
	if t.extra.inflight[keyString(hk, rk)] != nil {
		return nil, nil, transactionConflict()
	}
	old = t.getLocked(w.key)
	if w.cond != nil {
		ok, err := w.cond.Eval(old)
		if err != nil {
			return nil, nil, exprError(err)
		}
		if !ok {
			w.capacity.addWrite(t, old, nil, 1)
			return nil, nil, conditionFailed(old, w.failOld)
		}
	}
	item, err = w.next(old)
	if err != nil {
		return nil, nil, err
	}
	w.capacity.addWrite(t, old, item, 1)
	if !db.takeBudget(t, hk, w.capacity.units) {
		return nil, nil, throughputExceeded()
	}
	t.writeLocked(w.key, item, nil, db.now(), j)
	err = db.commit(j)
	j = nil
	if err != nil {
		return nil, nil, err
	}
	return old, item, nil
}

func transactionConflict() *Error {
	return newError(http.StatusBadRequest, CodeTransactionConflict, "Transaction is ongoing for the item")
}

func throughputExceeded() *Error {
	return newError(http.StatusBadRequest, CodeProvisionedThroughput, "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.")
}

func writeOutput(attrs attr.Item, c *capacity, mode string) map[string]any {
	out := map[string]any{}
	if attrs != nil {
		out["Attributes"] = attrs
	}
	if r := c.report(mode); r != nil {
		out["ConsumedCapacity"] = r
	}
	return out
}

type putItemInput struct {
	Item attr.Item
	writeCommon
}

func opPutItem(ctx context.Context, db *DB, body []byte) (any, error) {
	var in putItemInput
	if err := decodeInput(body, &in); err != nil {
		return nil, err
	}
	t, cond, err := in.start(db, true, nil)
	if err != nil {
		return nil, err
	}
	if in.Item == nil {
		return nil, validationf("1 validation error detected: Value null at 'item' failed to satisfy constraint: Member must not be null")
	}
	if err := t.validateItem(in.Item, false); err != nil {
		return nil, err
	}
	w := &singleWrite{t: t, key: t.KeyItem(in.Item), cond: cond, failOld: in.ReturnValuesOnConditionCheckFailure,
		next: func(attr.Item) (attr.Item, error) { return in.Item, nil }}
	return db.runWriteOld(ctx, w, &in.writeCommon)
}

type deleteItemInput struct {
	Key attr.Item
	writeCommon
}

// opDeleteItem has opPutItem's shape on purpose; what differs is the point: a key, not an
// item, is validated, and the write stores nothing.
func opDeleteItem(ctx context.Context, db *DB, body []byte) (any, error) {
	var in deleteItemInput
	if err := decodeInput(body, &in); err != nil {
		return nil, err
	}
	t, cond, err := in.start(db, true, nil)
	if err != nil {
		return nil, err
	}
	if err := t.validateKey(in.Key); err != nil {
		return nil, err
	}
	w := &singleWrite{t: t, key: in.Key, cond: cond, failOld: in.ReturnValuesOnConditionCheckFailure,
		next: func(attr.Item) (attr.Item, error) { return nil, nil }}
	return db.runWriteOld(ctx, w, &in.writeCommon)
}

type updateItemInput struct {
	Key              attr.Item
	UpdateExpression *string
	writeCommon
}

// parseUpdate parses an UpdateExpression and refuses one that touches a key attribute.
func parseUpdate(t *Table, s *string, p *expr.Params) (*expr.Update, error) {
	if s == nil {
		return nil, nil
	}
	u, err := expr.ParseUpdate(*s, p)
	if err != nil {
		return nil, exprError(err)
	}
	for _, name := range u.TopLevel() {
		if name == t.Hash.Name || name == t.Range.Name {
			return nil, validationf("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", name)
		}
	}
	return u, nil
}

// applyUpdate returns the item u makes of old (old nil: a new item with key's attributes).
func applyUpdate(t *Table, u *expr.Update, key, old attr.Item) (attr.Item, error) {
	base := old
	if base == nil {
		if u != nil && u.DeletesOnly() {
			// "REMOVE a" of an item that does not exist leaves it not existing:
			// AWS creates an item only for an update that adds something (or for
			// none at all).
			return nil, nil
		}
		base = t.KeyItem(key)
	}
	if u == nil {
		return base, nil
	}
	item, err := u.Apply(base)
	if err != nil {
		return nil, exprError(err)
	}
	if err := t.validateItem(item, true); err != nil {
		return nil, err
	}
	return item, nil
}

func opUpdateItem(ctx context.Context, db *DB, body []byte) (any, error) {
	var in updateItemInput
	if err := decodeInput(body, &in); err != nil {
		return nil, err
	}
	var u *expr.Update
	t, cond, err := in.start(db, false, func(t *Table, p *expr.Params) (err error) {
		u, err = parseUpdate(t, in.UpdateExpression, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := t.validateKey(in.Key); err != nil {
		return nil, err
	}
	w := &singleWrite{t: t, key: in.Key, cond: cond, failOld: in.ReturnValuesOnConditionCheckFailure,
		next: func(old attr.Item) (attr.Item, error) { return applyUpdate(t, u, in.Key, old) }}
	old, item, err := db.runWrite(ctx, w)
	if err != nil {
		return nil, err
	}
	var attrs attr.Item
	switch in.ReturnValues {
	case "ALL_OLD":
		attrs = old
	case "ALL_NEW":
		attrs = item
	case "UPDATED_OLD", "UPDATED_NEW":
		src := old
		if in.ReturnValues == "UPDATED_NEW" {
			src = item
		}
		if u != nil && src != nil {
			attrs = updatedAttrs(u, src)
		}
	}
	return writeOutput(attrs, &w.capacity, in.ReturnConsumedCapacity), nil
}

type getItemInput struct {
	TableName              string
	Key                    attr.Item
	ProjectionExpression   *string
	ConsistentRead         bool
	ReturnConsumedCapacity string
	exprParams
	legacyParams
}

// parseProjection parses a ProjectionExpression (nil when absent).
func parseProjection(s *string, p *expr.Params) (*expr.Projection, error) {
	if s == nil {
		return nil, nil
	}
	pr, err := expr.ParseProjection(*s, p)
	if err != nil {
		return nil, exprError(err)
	}
	return pr, nil
}

func project(pr *expr.Projection, item attr.Item) attr.Item {
	if pr == nil || item == nil {
		return item
	}
	return pr.Apply(item)
}

func opGetItem(ctx context.Context, db *DB, body []byte) (any, error) {
	var in getItemInput
	if err := decodeInput(body, &in); err != nil {
		return nil, err
	}
	if err := in.legacyParams.check(); err != nil {
		return nil, err
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	p, err := in.params()
	if err != nil {
		return nil, err
	}
	t, err := db.table(in.TableName)
	if err != nil {
		return nil, err
	}
	pr, err := parseProjection(in.ProjectionExpression, p)
	if err != nil {
		return nil, err
	}
	if err := p.CheckUnused(); err != nil {
		return nil, exprError(err)
	}
	if err := t.validateKey(in.Key); err != nil {
		return nil, err
	}
	if err := db.injectedFault(ctx, t.Name); err != nil {
		return nil, err
	}
	if err := t.rlockLive(); err != nil {
		return nil, err
	}
	var item attr.Item
	var blob string
	if e := t.getEntryLocked(in.Key); e != nil && e.item == nil && pr == nil {
		blob = e.blob // returned whole: written out from its binary form
	} else if e != nil {
		item = e.value()
	}
	t.mu.RUnlock()
	size := 0
	if item != nil {
		size = item.Size()
	} else if blob != "" {
		if size, err = attr.FramedSize(blob); err != nil {
			return nil, err
		}
	}
	c := capacity{table: t.Name, units: readUnits(size, in.ConsistentRead)}
	out := map[string]any{}
	if item != nil {
		out["Item"] = project(pr, item)
	} else if blob != "" {
		out["Item"] = blobJSON(blob)
	}
	if r := c.report(in.ReturnConsumedCapacity); r != nil {
		out["ConsumedCapacity"] = r
	}
	return out, nil
}

// updatedAttrs is what UPDATED_OLD and UPDATED_NEW return: exactly the paths the update
// touches, read from src, so that SET m.a.b returns {m:{a:{b}}} and not all of m, as AWS
// does; nil when none of them is in src.
func updatedAttrs(u *expr.Update, src attr.Item) attr.Item {
	out := u.UpdatedPaths().Apply(src)
	if len(out) == 0 {
		return nil
	}
	return out
}
