package ddb

import (
	"net/http"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Online index changes: UpdateTable's GlobalSecondaryIndexUpdates.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.OnlineOps.html
//
// Create adds the index at once to the set every write keeps up to date (so a
// write that breaks its key's type is refused from then on), as CREATING with
// Backfilling false (resource allocation); then a build copies the table's items
// into it a batch at a time under the table's lock (Backfilling true), skipping
// items whose key attribute is missing, of another type or too large, as AWS
// does ("the items remain in the table, but the index doesn't have a
// corresponding entry", GSI.OnlineOps.ViolationDetection); then it is ACTIVE.
// Until then a Query or Scan of it is refused. Delete takes the index out of
// the write path at once and shows it as DELETING until it is gone. Neither
// touches the table's stream: an index is not an item change.

// LimitExceededException: more than one index created or deleted at a time.
const CodeLimitExceeded = "LimitExceededException"

// backfillBatch is how many items one hold of the table's lock copies into a new index.
const backfillBatch = 1000

type gsiUpdateJSON struct {
	Create *indexJSON
	Update *struct {
		IndexName             string
		ProvisionedThroughput any
		OnDemandThroughput    any
		WarmThroughput        any
	}
	Delete *struct{ IndexName string }
}

// gsiUpdate is one checked GlobalSecondaryIndexUpdates entry that creates or
// deletes an index (nil: the call changes none, e.g. throughput only).
type gsiUpdate struct {
	create *indexJSON
	defs   []attrDefJSON
	delete string
}

// parseGSIUpdates checks the shape of GlobalSecondaryIndexUpdates: each entry is
// exactly one of Create, Update or Delete, and at most one creates or deletes an
// index ("You can create or delete only one global secondary index per
// UpdateTable operation"; more is LimitExceededException, observed).
func parseGSIUpdates(list []gsiUpdateJSON, defs []attrDefJSON) (*gsiUpdate, error) {
	var out *gsiUpdate
	for _, u := range list {
		n := 0
		for _, set := range []bool{u.Create != nil, u.Update != nil, u.Delete != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, validationf("One or more parameter values were invalid: One of GlobalSecondaryIndexUpdate.Create, GlobalSecondaryIndexUpdate.Update or GlobalSecondaryIndexUpdate.Delete must be set, and only one")
		}
		if u.Update != nil {
			continue
		}
		if out != nil {
			return nil, limitExceeded()
		}
		out = &gsiUpdate{create: u.Create, defs: defs}
		if u.Delete != nil {
			out = &gsiUpdate{delete: u.Delete.IndexName}
		}
	}
	if out != nil && out.create != nil {
		if err := checkKeyNames(defs, nil, []indexJSON{*out.create}, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func limitExceeded() *Error {
	return newError(http.StatusBadRequest, CodeLimitExceeded, "Subscriber limit exceeded: Only 1 online index can be created or deleted simultaneously per table")
}

// applyGSIUpdate creates or deletes the index of u on t and returns what starts
// its background work, to be called once t's lock is let go. The caller holds
// t.mu for writing.
func (db *DB) applyGSIUpdate(t *Table, u *gsiUpdate) (func(), error) {
	for _, ix := range t.GSIs() {
		if ix.status != indexActive {
			return nil, limitExceeded()
		}
	}
	if len(t.deleting) > 0 {
		return nil, limitExceeded()
	}
	if u.delete != "" {
		return db.startIndexDelete(t, u.delete)
	}
	j := u.create
	for _, ix := range t.indexes() {
		if ix.Name == j.IndexName {
			return nil, validationf("One or more parameter values were invalid: Index %s already exists", j.IndexName)
		}
	}
	// The index's key attributes: as the table defines them, or as the call does;
	// a definition that contradicts the table's is refused, one for no key of the
	// index is ignored (as AWS does).
	known := map[string]attr.Kind{}
	for _, d := range t.attrDefs {
		known[d.Name] = d.Type
	}
	defs := map[string]attr.Kind{}
	for _, d := range u.defs {
		k := attr.KindOf(d.AttributeType)
		if k != attr.KindS && k != attr.KindN && k != attr.KindB {
			return nil, validationf("1 validation error detected: Value '%s' at 'attributeDefinitions.attributeType' failed to satisfy constraint: Member must satisfy enum value set: [B, N, S]", d.AttributeType)
		}
		if was, ok := known[d.AttributeName]; ok && was != k {
			return nil, validationf("One or more parameter values were invalid: Attributes cannot be redefined. Please check that your attribute has the same type as previously defined. Attribute: %s, existing type: %s, new type: %s", d.AttributeName, was, k)
		}
		defs[d.AttributeName] = k
	}
	for name, k := range known {
		if _, ok := defs[name]; !ok {
			defs[name] = k
		}
	}
	for _, k := range j.KeySchema {
		if _, ok := defs[k.AttributeName]; !ok {
			return nil, validationf("One or more parameter values were invalid: Global Secondary Index key attribute %s is not defined in AttributeDefinitions", k.AttributeName)
		}
	}
	ix, err := newIndex(*j, defs, map[string]bool{}, true, map[string]bool{})
	if err != nil {
		return nil, err
	}
	ix.status, ix.online = indexCreating, true
	for _, kd := range []KeyDef{ix.Hash, ix.Range} {
		if kd.Name != "" && !hasDef(t.attrDefs, kd.Name) {
			t.attrDefs = append(t.attrDefs, kd)
		}
	}
	t.setIndexes(append(append([]*Index(nil), t.GSIs()...), ix), t.LSIs())
	return func() { go db.buildIndex(t, ix) }, nil
}

func hasDef(defs []KeyDef, name string) bool {
	for _, d := range defs {
		if d.Name == name {
			return true
		}
	}
	return false
}

// startIndexDelete takes the GSI named name out of t's write path and shows it as
// DELETING until a background step forgets it. The caller holds t.mu.
func (db *DB) startIndexDelete(t *Table, name string) (func(), error) {
	var keep []*Index
	var gone *Index
	for _, ix := range t.GSIs() {
		if ix.Name == name {
			gone = ix
			continue
		}
		keep = append(keep, ix)
	}
	if gone == nil {
		return nil, notFoundf("Requested resource not found: Index %s does not exist on table %s", name, t.Name)
	}
	gone.status = indexDeleting
	t.setIndexes(keep, t.LSIs())
	t.deleting = append(t.deleting, gone)
	return func() { go db.finishIndexDelete(t, gone) }, nil
}

// indexPhase marks a step of an online index change, for tests that hold it there
// (DB.indexHook).
type indexPhase string

const (
	phaseBackfill indexPhase = "backfill" // about to copy the items: Backfilling becomes true
	phaseActivate indexPhase = "activate" // copied: about to become ACTIVE
	phaseDrop     indexPhase = "drop"     // DELETING: about to be gone
)

func (db *DB) indexStep(ix *Index, p indexPhase) {
	if db.indexHook != nil {
		db.indexHook(ix.Name, p)
	}
}

// buildIndex backfills ix from t's items, a batch at a time, then makes it ACTIVE.
// Writes meanwhile keep ix up to date themselves; an item the backfill copies is
// the item as it is then, so the two agree.
func (db *DB) buildIndex(t *Table, ix *Index) {
	db.indexStep(ix, phaseBackfill)
	t.mu.Lock()
	if t.deleted || ix.status != indexCreating {
		t.mu.Unlock()
		return
	}
	ix.backfilling = true
	t.mu.Unlock()
	var after *entry
	for {
		t.mu.Lock()
		if t.deleted {
			t.mu.Unlock()
			return
		}
		n := 0
		var last *entry
		visit := func(e *entry) bool {
			if after != nil && !lessEntries(after, e) {
				return true
			}
			if n == backfillBatch {
				return false
			}
			n++
			last = e
			if ie := ix.entryOf(t, e); ie != nil && indexKeyFits(ix, ie) {
				ix.items.ReplaceOrInsert(ie)
			}
			return true
		}
		if after == nil {
			t.items.Ascend(visit)
		} else {
			t.items.AscendGreaterOrEqual(after, visit)
		}
		t.mu.Unlock()
		if n < backfillBatch {
			break
		}
		after = &entry{hk: last.hk, rk: last.rk}
	}
	db.indexStep(ix, phaseActivate)
	j := db.begin()
	t.mu.Lock()
	if !t.deleted && ix.status == indexCreating {
		ix.status, ix.backfilling = indexActive, false
		j.table(t)
	}
	db.commit(j)
	t.mu.Unlock()
}

// indexKeyFits reports whether an entry's index key values are within the key
// limits (not empty, 2,048 bytes for a partition key, 1,024 for a sort key): the
// backfill leaves out an item that breaks them, as it does one of the wrong type.
func indexKeyFits(ix *Index, e *entry) bool {
	if checkKeyValue(ix.Hash, e.hk, true, ix.Name) != nil {
		return false
	}
	return e.rk == nil || checkKeyValue(ix.Range, e.rk, false, ix.Name) == nil
}

// finishIndexDelete forgets a DELETING index and the attribute definitions only it used.
func (db *DB) finishIndexDelete(t *Table, ix *Index) {
	db.indexStep(ix, phaseDrop)
	j := db.begin()
	t.mu.Lock()
	for i, d := range t.deleting {
		if d == ix {
			t.deleting = append(t.deleting[:i:i], t.deleting[i+1:]...)
			break
		}
	}
	used := map[string]bool{t.Hash.Name: true, t.Range.Name: true}
	for _, other := range t.indexes() {
		used[other.Hash.Name], used[other.Range.Name] = true, true
	}
	defs := t.attrDefs[:0:0]
	for _, d := range t.attrDefs {
		if used[d.Name] {
			defs = append(defs, d)
		}
	}
	t.attrDefs = defs
	if !t.deleted {
		j.table(t)
	}
	db.commit(j)
	t.mu.Unlock()
}
