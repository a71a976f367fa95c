package ddb

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"strings"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
	"github.com/fourlanes/fourlanes/twin/ddb/expr"
	"github.com/google/btree"
)

// Query and Scan, on the table or a secondary index.
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Query.html
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Scan.html
//
// A page reads items in key order from the B-tree, starting at the key condition's
// lower (or upper, backwards) bound or just past ExclusiveStartKey: O(log n + k). Limit
// counts items read before the filter; a page also ends once it has read 1 MB (by
// AWS's size rule). When a page ends on Limit or size, LastEvaluatedKey is the last
// item read, even if nothing follows, as AWS does.

func init() {
	register(targetDynamoDB+"Query", opQuery)
	register(targetDynamoDB+"Scan", opScan)
}

// maxKey orders after every key value (its Kind is beyond every real Kind), so a
// pivot built from it lands after all entries with the preceding key parts.
var maxKey = &attr.Value{Kind: attr.Kind(255)}

type readCommon struct {
	TableName              string
	IndexName              *string
	FilterExpression       *string
	ProjectionExpression   *string
	Select                 string
	Limit                  *int
	ConsistentRead         bool
	ExclusiveStartKey      attr.Item
	ReturnConsumedCapacity string
	exprParams
	legacyParams
}

// readPlan is a Query's or Scan's checked parameters.
type readPlan struct {
	t           *Table
	ix          *Index // nil: the table
	hash, rng   KeyDef // of the table or index
	filter      *expr.Condition
	proj        *expr.Projection
	sel         string
	limit       int
	consistent  bool
	fullItem    bool // read the whole item (table, or an index with ALL_ATTRIBUTES)
	start       *entry
	p           *expr.Params
	returnUnits string
}

func (rc *readCommon) plan(db *DB) (*readPlan, error) {
	if err := rc.legacyParams.check(); err != nil {
		return nil, err
	}
	if err := checkReturnConsumed(rc.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if err := checkEnum("select", rc.Select, "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES", "SPECIFIC_ATTRIBUTES", "COUNT"); err != nil {
		return nil, err
	}
	if rc.Limit != nil && *rc.Limit < 1 {
		return nil, validationf("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *rc.Limit)
	}
	p, err := rc.params()
	if err != nil {
		return nil, err
	}
	t, err := db.table(rc.TableName)
	if err != nil {
		return nil, err
	}
	pl := &readPlan{t: t, hash: t.Hash, rng: t.Range, consistent: rc.ConsistentRead, p: p, returnUnits: rc.ReturnConsumedCapacity, fullItem: true}
	if rc.Limit != nil {
		pl.limit = *rc.Limit
	}
	if rc.IndexName != nil {
		for _, ix := range t.indexes() {
			if ix.Name == *rc.IndexName {
				pl.ix = ix
			}
		}
		if pl.ix == nil {
			return nil, validationf("The table does not have the specified index: %s", *rc.IndexName)
		}
		t.mu.RLock()
		creating := pl.ix.status == indexCreating
		t.mu.RUnlock()
		if creating {
			// "Cannot read from backfilling global secondary index" is what AWS
			// answers a Query or Scan of an index that is not ACTIVE yet.
			return nil, validationf("Cannot read from backfilling global secondary index: %s", pl.ix.Name)
		}
		pl.hash, pl.rng = pl.ix.Hash, pl.ix.Range
		if pl.ix.Global && rc.ConsistentRead {
			return nil, validationf("Consistent reads are not supported on global secondary indexes")
		}
	}
	pl.sel = rc.Select
	switch {
	case pl.sel == "" && rc.ProjectionExpression != nil:
		pl.sel = "SPECIFIC_ATTRIBUTES"
	case pl.sel == "" && pl.ix != nil:
		pl.sel = "ALL_PROJECTED_ATTRIBUTES"
	case pl.sel == "":
		pl.sel = "ALL_ATTRIBUTES"
	}
	if rc.ProjectionExpression != nil && pl.sel != "SPECIFIC_ATTRIBUTES" {
		return nil, validationf("Cannot specify the ProjectionExpression when choosing to get %s", pl.sel)
	}
	if pl.sel == "SPECIFIC_ATTRIBUTES" && rc.ProjectionExpression == nil {
		return nil, validationf("SPECIFIC_ATTRIBUTES requires a ProjectionExpression")
	}
	if pl.sel == "ALL_PROJECTED_ATTRIBUTES" && pl.ix == nil {
		return nil, validationf("ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName")
	}
	if pl.ix != nil {
		pl.fullItem = pl.ix.ProjectionType == "ALL" || (!pl.ix.Global && pl.sel == "ALL_ATTRIBUTES")
		if pl.sel == "ALL_ATTRIBUTES" && pl.ix.Global && pl.ix.ProjectionType != "ALL" {
			return nil, validationf("One or more parameter values were invalid: Select type ALL_ATTRIBUTES is not supported for global secondary index %s because its projection type is not ALL", pl.ix.Name)
		}
	}
	if rc.FilterExpression != nil {
		if pl.filter, err = expr.ParseCondition(*rc.FilterExpression, "FilterExpression", p); err != nil {
			return nil, exprError(err)
		}
	}
	if pl.proj, err = parseProjection(rc.ProjectionExpression, p); err != nil {
		return nil, err
	}
	if rc.ExclusiveStartKey != nil {
		if pl.start, err = pl.startEntry(rc.ExclusiveStartKey); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// startEntry is the tree position of ExclusiveStartKey: the table's key, plus the
// index's key for an index.
func (pl *readPlan) startEntry(esk attr.Item) (*entry, error) {
	t := pl.t
	want := map[string]attr.Kind{t.Hash.Name: t.Hash.Type}
	if t.Range.Name != "" {
		want[t.Range.Name] = t.Range.Type
	}
	if pl.ix != nil {
		want[pl.ix.Hash.Name] = pl.ix.Hash.Type
		if pl.ix.Range.Name != "" {
			want[pl.ix.Range.Name] = pl.ix.Range.Type
		}
	}
	if len(esk) != len(want) {
		return nil, validationf("The provided starting key is invalid: The provided key element does not match the schema")
	}
	for name, k := range want {
		v := esk[name]
		if v == nil || v.Kind != k {
			return nil, validationf("The provided starting key is invalid: The provided key element does not match the schema")
		}
		if v.Size() == 0 {
			return nil, validationf("The provided starting key is invalid: One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty %s value. Key: %s", emptyWord(v), name)
		}
	}
	pk, sk := t.keyOf(esk)
	if pl.ix == nil {
		return &entry{hk: pk, rk: sk}, nil
	}
	e := &entry{hk: esk[pl.ix.Hash.Name], pk: pk, sk: sk}
	if pl.ix.Range.Name != "" {
		e.rk = esk[pl.ix.Range.Name]
	}
	return e, nil
}

func (pl *readPlan) tree() *btree.BTreeG[*entry] {
	if pl.ix != nil {
		return pl.ix.items
	}
	return pl.t.items
}

// view is what a read sees of a stored item: the index's projection (or the whole item).
func (pl *readPlan) view(item attr.Item) attr.Item {
	if pl.fullItem {
		return item
	}
	return pl.ix.Project(pl.t, item)
}

// lastKey is LastEvaluatedKey for e's item: the table's key, plus the index's key.
func (pl *readPlan) lastKey(item attr.Item) attr.Item {
	k := pl.t.KeyItem(item)
	if pl.ix != nil {
		k[pl.ix.Hash.Name] = item[pl.ix.Hash.Name]
		if pl.ix.Range.Name != "" {
			k[pl.ix.Range.Name] = item[pl.ix.Range.Name]
		}
	}
	return k
}

// page is one Query or Scan page being read.
type page struct {
	pl        *readPlan
	items     []json.Marshaler // attr.Item, or blobJSON for an item kept in binary form
	count     int
	scanned   int
	bytes     int
	last      attr.Item // the last item read, when the page ended on Limit or size
	err       error
	countOnly bool
}

// visit reads one item; false ends the page.
func (pg *page) visit(e *entry) bool {
	pl := pg.pl
	if e.item == nil && e.blob != "" && pl.filter == nil && pl.proj == nil && pl.fullItem {
		// An item kept in binary form, returned whole: written out as JSON from
		// its binary form, never decoded.
		return pg.visitBlob(e)
	}
	v := pl.view(e.value())
	pg.scanned++
	pg.bytes += v.Size()
	keep := true
	if pl.filter != nil {
		ok, err := pl.filter.Eval(v)
		if err != nil {
			pg.err = exprError(err)
			return false
		}
		keep = ok
	}
	if keep {
		pg.count++
		if !pg.countOnly {
			pg.items = append(pg.items, project(pl.proj, v))
		}
	}
	if (pl.limit > 0 && pg.scanned >= pl.limit) || pg.bytes >= maxPageBytes {
		pg.last = pl.lastKey(e.value())
		return false
	}
	return true
}

func (pg *page) visitBlob(e *entry) bool {
	pl := pg.pl
	size, err := attr.FramedSize(e.blob)
	if err != nil {
		pg.err = err
		return false
	}
	pg.scanned++
	pg.bytes += size
	pg.count++
	if !pg.countOnly {
		pg.items = append(pg.items, blobJSON(e.blob))
	}
	if (pl.limit > 0 && pg.scanned >= pl.limit) || pg.bytes >= maxPageBytes {
		pg.last = pl.lastKey(e.value())
		return false
	}
	return true
}

// blobJSON is an item kept in binary form, written to a response as its JSON.
type blobJSON string

func (b blobJSON) MarshalJSON() ([]byte, error) { return attr.AppendFramedJSON(nil, string(b)) }

func (pg *page) output() map[string]any {
	pl := pg.pl
	out := map[string]any{"Count": pg.count, "ScannedCount": pg.scanned}
	if !pg.countOnly {
		items := pg.items
		if items == nil {
			items = []json.Marshaler{}
		}
		out["Items"] = items
	}
	if pg.last != nil {
		out["LastEvaluatedKey"] = pg.last
	}
	c := capacity{table: pl.t.Name}
	u := readUnits(pg.bytes, pl.consistent)
	if pl.ix != nil {
		c.addIndex(pl.ix, u)
	} else {
		c.units = u
	}
	if r := c.report(pl.returnUnits); r != nil {
		out["ConsumedCapacity"] = r
	}
	return out
}

// decodePlan decodes a Query or Scan request into in and plans the read.
func decodePlan(db *DB, body []byte, in interface{ plan(*DB) (*readPlan, error) }) (*readPlan, error) {
	if err := decodeInput(body, in); err != nil {
		return nil, err
	}
	return in.plan(db)
}

// read runs walk, which fills a page, under the read lock of pl's table (after any
// injected fault; a table deleted meanwhile is not found), and answers with the page.
func (pl *readPlan) read(ctx context.Context, db *DB, walk func(pg *page)) (any, error) {
	if err := db.injectedFault(ctx, pl.t.Name); err != nil {
		return nil, err
	}
	pg := &page{pl: pl, countOnly: pl.sel == "COUNT"}
	if err := pl.t.rlockLive(); err != nil {
		return nil, err
	}
	walk(pg)
	pl.t.mu.RUnlock()
	if pg.err != nil {
		return nil, pg.err
	}
	return pg.output(), nil
}

// rlockLive takes t's read lock, or answers ResourceNotFound (lock not held) when t was
// deleted meanwhile.
func (t *Table) rlockLive() error {
	t.mu.RLock()
	if t.deleted {
		t.mu.RUnlock()
		return notFoundf("Requested resource not found: Table: %s not found", t.Name)
	}
	return nil
}

type queryInput struct {
	KeyConditionExpression *string
	ScanIndexForward       *bool
	readCommon
}

func opQuery(ctx context.Context, db *DB, body []byte) (any, error) {
	var in queryInput
	pl, err := decodePlan(db, body, &in)
	if err != nil {
		return nil, err
	}
	if in.KeyConditionExpression == nil {
		return nil, validationf("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
	}
	kc, err := expr.ParseKeyCondition(*in.KeyConditionExpression, pl.p)
	if err != nil {
		return nil, exprError(err)
	}
	if err := pl.p.CheckUnused(); err != nil {
		return nil, exprError(err)
	}
	if err := pl.filterSparesKeys(); err != nil {
		return nil, err
	}
	if kc.HashName != pl.hash.Name && kc.RangeName == pl.hash.Name && kc.Range.Op == "=" {
		// Both conditions are equalities and the parser, not knowing the schema, took
		// the first written (the sort key's) as the partition key's.
		kc.HashName, kc.Hash, kc.RangeName, kc.Range = kc.RangeName, kc.Range.A, kc.HashName, &expr.RangeCond{Op: "=", A: kc.Hash}
	}
	if kc.HashName != pl.hash.Name {
		return nil, validationf("Query condition missed key schema element: %s", pl.hash.Name)
	}
	if kc.Hash == nil || kc.Hash.Kind != pl.hash.Type {
		return nil, validationf("One or more parameter values were invalid: Condition parameter type does not match schema type")
	}
	rng := kc.Range
	if kc.RangeName != "" {
		if kc.RangeName != pl.rng.Name || rng == nil {
			return nil, validationf("Query condition missed key schema element: %s", nameOr(pl.rng.Name, kc.RangeName))
		}
		for _, v := range []*attr.Value{rng.A, rng.B} {
			if v != nil && v.Kind != pl.rng.Type {
				return nil, validationf("One or more parameter values were invalid: Condition parameter type does not match schema type")
			}
		}
		if rng.Op == "begins_with" && pl.rng.Type == attr.KindN {
			return nil, validationf("Invalid KeyConditionExpression: Incorrect operand type for operator or function; operator or function: begins_with, operand type: N")
		}
		if rng.Op == "BETWEEN" {
			if c, _ := attr.Compare(rng.A, rng.B); c > 0 {
				return nil, validationf("Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {%s:%s}, upper bound operand: AttributeValue: {%s:%s}", rng.A.Kind, scalarText(rng.A), rng.B.Kind, scalarText(rng.B))
			}
		}
	} else {
		rng = nil
	}
	forward := in.ScanIndexForward == nil || *in.ScanIndexForward
	if pl.start != nil && pl.ix == nil && pl.t.Range.Name == "" {
		// A table without a sort key holds one item per partition key: a Query
		// starting after that item has nothing to read, and AWS refuses it.
		return nil, validationf("The provided starting key is invalid: Exclusive start key must not be given when querying a table without a sort key: ExclusiveStartKey: %s", keyText(in.ExclusiveStartKey))
	}
	if pl.start != nil {
		if compareKey(pl.start.hk, kc.Hash) != 0 || (rng != nil && !rng.Match(pl.start.rk)) {
			return nil, validationf("The provided starting key does not match the range key predicate")
		}
	}
	lower, lowerIncl, upper, upperIncl := bounds(rng)
	return pl.read(ctx, db, func(pg *page) {
		tree := pl.tree()
		visit := func(e *entry) bool {
			if compareKey(e.hk, kc.Hash) != 0 {
				return false
			}
			if pl.start != nil && !lessEntries(e, pl.start) && !lessEntries(pl.start, e) {
				return true // ExclusiveStartKey itself
			}
			if rng != nil {
				if forward && upper != nil {
					if c := compareKey(e.rk, upper); c > 0 || (c == 0 && !upperIncl) {
						return false
					}
				}
				if !forward && lower != nil {
					if c := compareKey(e.rk, lower); c < 0 || (c == 0 && !lowerIncl) {
						return false
					}
				}
				if !rng.Match(e.rk) {
					return true
				}
			}
			return pg.visit(e)
		}
		if forward {
			pivot := pl.start
			if pivot == nil {
				pivot = &entry{hk: kc.Hash, rk: lower}
			}
			tree.AscendGreaterOrEqual(pivot, visit)
		} else {
			pivot := pl.start
			if pivot == nil {
				rk := upper
				if rk == nil {
					rk = maxKey
				}
				pivot = &entry{hk: kc.Hash, rk: rk, pk: maxKey, sk: maxKey}
			}
			tree.DescendLessOrEqual(pivot, visit)
		}
	})
}

func nameOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// keyText writes a key as AWS's messages do: {pk=AttributeValue: {S:x}}.
func keyText(k attr.Item) string {
	names := sortedNames(k)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=AttributeValue: {" + k[n].Kind.String() + ":" + scalarText(k[n]) + "}"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func scalarText(v *attr.Value) string {
	if v.Kind == attr.KindB {
		return string(v.B)
	}
	return v.S
}

// bounds returns the sort-key range a condition allows (nil: unbounded on that side).
func bounds(r *expr.RangeCond) (lower *attr.Value, lowerIncl bool, upper *attr.Value, upperIncl bool) {
	if r == nil {
		return nil, false, nil, false
	}
	switch r.Op {
	case "=":
		return r.A, true, r.A, true
	case ">":
		return r.A, false, nil, false
	case ">=":
		return r.A, true, nil, false
	case "<":
		return nil, false, r.A, false
	case "<=":
		return nil, false, r.A, true
	case "BETWEEN":
		return r.A, true, r.B, true
	case "begins_with":
		return r.A, true, prefixEnd(r.A), false
	}
	return nil, false, nil, false
}

// prefixEnd is the least value greater than every value with prefix v (nil when there
// is none: v is all 0xff bytes).
func prefixEnd(v *attr.Value) *attr.Value {
	b := []byte(v.S)
	if v.Kind == attr.KindB {
		b = append([]byte(nil), v.B...)
	}
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b = append(b[:i], b[i]+1)
			if v.Kind == attr.KindB {
				return attr.Bin(b)
			}
			return attr.Str(string(b))
		}
	}
	return nil
}

type scanInput struct {
	Segment       *int
	TotalSegments *int
	readCommon
}

func opScan(ctx context.Context, db *DB, body []byte) (any, error) {
	var in scanInput
	pl, err := decodePlan(db, body, &in)
	if err != nil {
		return nil, err
	}
	if err := pl.p.CheckUnused(); err != nil {
		return nil, exprError(err)
	}
	seg, total := 0, 1
	switch {
	case in.Segment == nil && in.TotalSegments == nil:
	case in.Segment == nil || in.TotalSegments == nil:
		return nil, validationf("The TotalSegments parameter is required but was not present in the request when Segment parameter is present")
	default:
		seg, total = *in.Segment, *in.TotalSegments
		if total < 1 || total > 1000000 {
			return nil, validationf("1 validation error detected: Value '%d' at 'totalSegments' failed to satisfy constraint: Member must have value less than or equal to 1000000", total)
		}
		if seg < 0 || seg >= total {
			return nil, validationf("The Segment parameter is zero-based and must be less than parameter TotalSegments: Segment: %d is not less than TotalSegments: %d", seg, total)
		}
	}
	t := pl.t
	if pl.start != nil && total > 1 && segmentOf(t, in.ExclusiveStartKey, total) != seg {
		// A parallel scan's segment holds the items whose partition key maps to
		// it: a start key of another segment is an error on AWS.
		return nil, validationf("The provided Exclusive start key does not map to the provided Segment and TotalSegments values: Segment: %d, TotalSegments: %d", seg, total)
	}
	return pl.read(ctx, db, func(pg *page) {
		visit := func(e *entry) bool {
			if pl.start != nil && !lessEntries(pl.start, e) {
				return true // up to and including ExclusiveStartKey
			}
			if total > 1 && segmentOfKey(tableHash(pl, e), total) != seg {
				return true
			}
			return pg.visit(e)
		}
		if pl.start != nil {
			pl.tree().AscendGreaterOrEqual(pl.start, visit)
		} else {
			pl.tree().Ascend(visit)
		}
	})
}

// segmentOf assigns an item to a parallel-scan segment by its partition key.
func segmentOf(t *Table, item attr.Item, total int) int {
	hk, _ := t.keyOf(item)
	return segmentOfKey(hk, total)
}

// tableHash is the table's partition key value of a tree entry of pl's.
func tableHash(pl *readPlan, e *entry) *attr.Value {
	if pl.ix != nil {
		return e.pk
	}
	return e.hk
}

func segmentOfKey(hk *attr.Value, total int) int {
	h := fnv.New32a()
	h.Write([]byte(keyString(hk, nil)))
	return int(h.Sum32() % uint32(total))
}

// filterSparesKeys refuses a Query filter on a key attribute of the table or index
// queried, as AWS does ("Filter Expression can only contain non-primary key attributes").
func (pl *readPlan) filterSparesKeys() error {
	if pl.filter == nil {
		return nil
	}
	for _, name := range pl.filter.TopLevel() {
		if name == pl.hash.Name || (pl.rng.Name != "" && name == pl.rng.Name) {
			return validationf("Filter Expression can only contain non-primary key attributes: Primary key attribute: %s", name)
		}
	}
	return nil
}
