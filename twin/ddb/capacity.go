package ddb

import (
	"time"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Consumed capacity by AWS's rules:
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html
//   - a write costs 1 WCU per 1 KB of the larger of the item before and after it
//     (rounded up; a write of nothing, such as deleting a missing item, still costs 1);
//   - a read costs 1 RCU per 4 KB, half of that when eventually consistent; Query and
//     Scan sum the sizes of the items they read and round up once per page, BatchGetItem
//     rounds each item up first;
//   - inside a transaction both cost twice as much.
// Secondary indexes: a write that adds or removes an index entry costs that entry's
// size; one that moves an entry (its index key changed) costs both; one that changes no
// projected attribute costs nothing on that index.

func writeUnits(size int) float64 {
	u := (size + 1023) / 1024
	if u < 1 {
		u = 1
	}
	return float64(u)
}

func readUnits(size int, consistent bool) float64 {
	u := float64(max(1, (size+4095)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// capacity accumulates what one request consumed on one table and its indexes.
type capacity struct {
	table string
	write bool
	units float64            // the table's own
	gsi   map[string]float64 // by index name
	lsi   map[string]float64
}

func (c *capacity) addIndex(ix *Index, u float64) {
	m := &c.lsi
	if ix.Global {
		m = &c.gsi
	}
	if *m == nil {
		*m = map[string]float64{}
	}
	(*m)[ix.Name] += u
}

func (c *capacity) total() float64 {
	n := c.units
	for _, u := range c.gsi {
		n += u
	}
	for _, u := range c.lsi {
		n += u
	}
	return n
}

// addWrite adds the cost of replacing old by item (either may be nil) on t, times factor
// (2 in a transaction).
func (c *capacity) addWrite(t *Table, old, item attr.Item, factor float64) {
	size := 0
	if old != nil {
		size = old.Size()
	}
	if item != nil {
		size = max(size, item.Size())
	}
	c.units += writeUnits(size) * factor
	for _, ix := range t.indexes() {
		if u := indexWriteUnits(t, ix, old, item); u > 0 {
			c.addIndex(ix, u*factor)
		}
	}
}

func indexWriteUnits(t *Table, ix *Index, old, item attr.Item) float64 {
	var oe, ne *entry
	if old != nil {
		oe = ix.entryFor(t, old)
	}
	if item != nil {
		ne = ix.entryFor(t, item)
	}
	switch {
	case oe == nil && ne == nil:
		return 0
	case ne == nil:
		return writeUnits(ix.Project(t, old).Size())
	case oe == nil:
		return writeUnits(ix.Project(t, item).Size())
	}
	po, pn := ix.Project(t, old), ix.Project(t, item)
	if compareKey(oe.hk, ne.hk) != 0 || compareKey(oe.rk, ne.rk) != 0 {
		return writeUnits(po.Size()) + writeUnits(pn.Size())
	}
	if attr.EqualItems(po, pn) {
		return 0
	}
	return writeUnits(max(po.Size(), pn.Size()))
}

// consumedJSON is ConsumedCapacity on the wire.
type consumedJSON struct {
	TableName              string
	CapacityUnits          float64
	ReadCapacityUnits      float64              `json:",omitempty"`
	WriteCapacityUnits     float64              `json:",omitempty"`
	Table                  *unitsJSON           `json:",omitempty"`
	GlobalSecondaryIndexes map[string]unitsJSON `json:",omitempty"`
	LocalSecondaryIndexes  map[string]unitsJSON `json:",omitempty"`
}

type unitsJSON struct {
	CapacityUnits      float64
	ReadCapacityUnits  float64 `json:",omitempty"`
	WriteCapacityUnits float64 `json:",omitempty"`
}

func (c *capacity) unitsOf(u float64) unitsJSON {
	if c.write {
		return unitsJSON{CapacityUnits: u, WriteCapacityUnits: u}
	}
	return unitsJSON{CapacityUnits: u, ReadCapacityUnits: u}
}

// report returns ConsumedCapacity for mode (TOTAL, INDEXES; nil for NONE or "").
func (c *capacity) report(mode string) *consumedJSON {
	if mode != "TOTAL" && mode != "INDEXES" {
		return nil
	}
	tot := c.unitsOf(c.total())
	out := &consumedJSON{TableName: c.table, CapacityUnits: tot.CapacityUnits, ReadCapacityUnits: tot.ReadCapacityUnits, WriteCapacityUnits: tot.WriteCapacityUnits}
	if mode == "INDEXES" {
		tu := c.unitsOf(c.units)
		out.Table = &tu
		for name, u := range c.gsi {
			if out.GlobalSecondaryIndexes == nil {
				out.GlobalSecondaryIndexes = map[string]unitsJSON{}
			}
			out.GlobalSecondaryIndexes[name] = c.unitsOf(u)
		}
		for name, u := range c.lsi {
			if out.LocalSecondaryIndexes == nil {
				out.LocalSecondaryIndexes = map[string]unitsJSON{}
			}
			out.LocalSecondaryIndexes[name] = c.unitsOf(u)
		}
	}
	return out
}

// capacities keeps one capacity per table, in first-use order (batches, transactions).
type capacities struct {
	list []*capacity
}

func (cs *capacities) of(table string, write bool) *capacity {
	for _, c := range cs.list {
		if c.table == table && c.write == write {
			return c
		}
	}
	c := &capacity{table: table, write: write}
	cs.list = append(cs.list, c)
	return c
}

func (cs *capacities) report(mode string) []*consumedJSON {
	if mode != "TOTAL" && mode != "INDEXES" {
		return nil
	}
	out := make([]*consumedJSON, 0, len(cs.list))
	byTable := map[string]*consumedJSON{}
	for _, c := range cs.list {
		r := c.report(mode)
		if prev := byTable[c.table]; prev != nil {
			// A transaction that reads (ConditionCheck) and writes one table: one entry.
			prev.CapacityUnits += r.CapacityUnits
			prev.ReadCapacityUnits += r.ReadCapacityUnits
			prev.WriteCapacityUnits += r.WriteCapacityUnits
			if prev.Table != nil && r.Table != nil {
				prev.Table.CapacityUnits += r.Table.CapacityUnits
				prev.Table.ReadCapacityUnits += r.Table.ReadCapacityUnits
				prev.Table.WriteCapacityUnits += r.Table.WriteCapacityUnits
			}
			continue
		}
		byTable[c.table] = r
		out = append(out, r)
	}
	return out
}

func checkReturnConsumed(v string) error {
	return checkEnum("returnConsumedCapacity", v, "INDEXES", "TOTAL", "NONE")
}

// partitionBudgets are per-partition-key token buckets (Options.PartitionWCU): each
// refills at PartitionWCU per second and holds at most one second's worth, so a burst
// of one second's budget passes and a sustained rate above it is refused, as AWS's
// 1,000 WCU/s partition limit refuses it. Guarded by the table's mutex.
type partitionBudgets struct {
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// takeBudget spends units of the partition hk's budget, or reports false (nothing
// spent) when it has too little. The caller holds t's write lock.
func (db *DB) takeBudget(t *Table, hk *attr.Value, units float64) bool {
	return db.takeBudgets([]budgetReq{{t, hk, units}}) < 0
}

// budgetReq is one write's claim on its partition's budget.
type budgetReq struct {
	t     *Table
	hk    *attr.Value
	units float64
}

// takeBudgets spends every request's units, or none of them: it returns the index of
// the first request whose partition has too little left (-1 when all were spent). The
// caller holds the tables' write locks.
func (db *DB) takeBudgets(reqs []budgetReq) int {
	rate := db.opts.PartitionWCU
	if rate <= 0 {
		return -1
	}
	now := db.now()
	type claim struct {
		bk   *bucket
		need float64
	}
	claims := map[*bucket]*claim{}
	for i, r := range reqs {
		bk := r.t.extra.budgets.get(keyString(r.hk, nil), now, rate, db.opts.PartitionStartEmpty)
		c := claims[bk]
		if c == nil {
			c = &claim{bk: bk}
			claims[bk] = c
		}
		c.need += r.units
		if bk.tokens < c.need {
			return i
		}
	}
	for _, c := range claims {
		c.bk.tokens -= c.need
	}
	return -1
}

func (b *partitionBudgets) get(k string, now time.Time, rate float64, empty bool) *bucket {
	if b.buckets == nil {
		b.buckets = map[string]*bucket{}
	}
	bk := b.buckets[k]
	if bk == nil {
		if len(b.buckets) >= 4096 {
			b.prune(now, rate)
		}
		bk = &bucket{tokens: rate, at: now}
		if empty {
			bk.tokens = 0
		}
		b.buckets[k] = bk
	}
	bk.refill(now, rate)
	return bk
}

func (bk *bucket) refill(now time.Time, rate float64) {
	if d := now.Sub(bk.at); d > 0 {
		bk.tokens = min(rate, bk.tokens+d.Seconds()*rate)
		bk.at = now
	}
}

// prune forgets buckets that have refilled completely: they are as good as new.
func (b *partitionBudgets) prune(now time.Time, rate float64) {
	for k, bk := range b.buckets {
		bk.refill(now, rate)
		if bk.tokens >= rate {
			delete(b.buckets, k)
		}
	}
}
