package ddb

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
	"github.com/fourlanes/fourlanes/twin/ddb/expr"
)

// TransactWriteItems and TransactGetItems.
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html
//
// A transaction write-locks all its tables (lockTables, in name order), evaluates every
// action against the current items, and commits all or nothing. With Options.Conflicts
// it first marks its items in-flight and lets the locks go for ConflictWindow before it
// re-locks, re-checks and commits, as a distributed transaction's prepare phase would:
// another transaction meeting a marked item is cancelled (TransactionConflict), a
// single-item write gets TransactionConflictException.

func init() {
	register(targetDynamoDB+"TransactWriteItems", opTransactWriteItems)
	register(targetDynamoDB+"TransactGetItems", opTransactGetItems)
}

// tokenTTL is how long a ClientRequestToken stays idempotent after its transaction.
const tokenTTL = 10 * time.Minute

type txnOpJSON struct {
	TableName                           string
	Item                                attr.Item
	Key                                 attr.Item
	UpdateExpression                    *string
	ConditionExpression                 *string
	ReturnValuesOnConditionCheckFailure string
	exprParams
	legacyParams
}

type transactWriteItemJSON struct {
	ConditionCheck *txnOpJSON `json:",omitempty"`
	Put            *txnOpJSON `json:",omitempty"`
	Delete         *txnOpJSON `json:",omitempty"`
	Update         *txnOpJSON `json:",omitempty"`
}

type transactWriteInput struct {
	TransactItems               []transactWriteItemJSON
	ClientRequestToken          *string
	ReturnConsumedCapacity      string
	ReturnItemCollectionMetrics string
}

// txnAction is one prepared action of a transaction.
type txnAction struct {
	kind    string // Put, Update, Delete, ConditionCheck
	t       *Table
	key     attr.Item
	hk      *attr.Value
	ks      string
	item    attr.Item // Put
	update  *expr.Update
	cond    *expr.Condition
	failOld string

	old, next attr.Item // evaluated under the locks
}

// txnRun marks the items of one in-flight transaction (Options.Conflicts).
type txnRun struct{}

func opTransactWriteItems(ctx context.Context, db *DB, body []byte) (any, error) {
	var in transactWriteInput
	if err := decodeInput(body, &in); err != nil {
		return nil, err
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	acts, err := db.prepareTxn(in.TransactItems)
	if err != nil {
		return nil, err
	}
	var token string
	var hash [32]byte
	if in.ClientRequestToken != nil {
		token = *in.ClientRequestToken
		if token == "" || len(token) > 36 {
			return nil, validationf("1 validation error detected: Value '%s' at 'clientRequestToken' failed to satisfy constraint: Member must have length less than or equal to 36", token)
		}
		canon, _ := json.Marshal(in.TransactItems)
		hash = sha256.Sum256(canon)
		if out, err := db.ext.beginToken(token, hash, db.now()); err != nil || out != nil {
			return out, err
		}
	}
	names := make([]string, len(acts))
	for i, a := range acts {
		names[i] = a.t.Name
	}
	out, err := func() (any, error) {
		if err := db.injectedFault(ctx, names...); err != nil {
			return nil, err
		}
		cs, err := db.runTxn(acts)
		if err != nil {
			return nil, err
		}
		res := map[string]any{}
		if r := cs.report(in.ReturnConsumedCapacity); r != nil {
			res["ConsumedCapacity"] = r
		}
		return res, nil
	}()
	if token != "" {
		db.ext.endToken(token, out, err == nil, db.now())
	}
	return out, err
}

// prepareTxn validates the request and parses every action's expressions.
func (db *DB) prepareTxn(items []transactWriteItemJSON) ([]*txnAction, error) {
	if len(items) == 0 || len(items) > maxTxnActions {
		return nil, validationf("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to %d and greater than or equal to 1", maxTxnActions)
	}
	acts := make([]*txnAction, 0, len(items))
	seen := map[*Table]map[string]bool{}
	size := 0
	for _, ti := range items {
		var op *txnOpJSON
		var kind string
		n := 0
		for _, c := range []struct {
			k  string
			op *txnOpJSON
		}{{"ConditionCheck", ti.ConditionCheck}, {"Put", ti.Put}, {"Delete", ti.Delete}, {"Update", ti.Update}} {
			if c.op != nil {
				n++
				op, kind = c.op, c.k
			}
		}
		if n != 1 {
			return nil, validationf("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		if err := op.legacyParams.check(); err != nil {
			return nil, err
		}
		if err := checkEnum("returnValuesOnConditionCheckFailure", op.ReturnValuesOnConditionCheckFailure, "ALL_OLD", "NONE"); err != nil {
			return nil, err
		}
		t, err := db.table(op.TableName)
		if err != nil {
			return nil, err
		}
		p, err := op.params()
		if err != nil {
			return nil, err
		}
		a := &txnAction{kind: kind, t: t, failOld: op.ReturnValuesOnConditionCheckFailure}
		if op.ConditionExpression != nil {
			if a.cond, err = expr.ParseCondition(*op.ConditionExpression, "ConditionExpression", p); err != nil {
				return nil, exprError(err)
			}
		} else if kind == "ConditionCheck" {
			return nil, validationf("1 validation error detected: Value null at 'transactItems.%d.member.conditionCheck.conditionExpression' failed to satisfy constraint: Member must not be null", len(acts)+1)
		}
		switch kind {
		case "Put":
			if op.Item == nil {
				return nil, validationf("1 validation error detected: Value null at 'transactItems.%d.member.put.item' failed to satisfy constraint: Member must not be null", len(acts)+1)
			}
			if err := t.validateItem(op.Item, false); err != nil {
				return nil, itemInvalid(len(items), len(acts), err)
			}
			a.item, a.key = op.Item, t.KeyItem(op.Item)
			size += op.Item.Size()
		default:
			if err := t.validateKey(op.Key); err != nil {
				return nil, itemInvalid(len(items), len(acts), err)
			}
			a.key = op.Key
			size += op.Key.Size()
			if kind == "Update" {
				if op.UpdateExpression == nil {
					return nil, validationf("1 validation error detected: Value null at 'transactItems.%d.member.update.updateExpression' failed to satisfy constraint: Member must not be null", len(acts)+1)
				}
				if a.update, err = parseUpdate(t, op.UpdateExpression, p); err != nil {
					return nil, err
				}
			}
		}
		if err := p.CheckUnused(); err != nil {
			return nil, exprError(err)
		}
		hk, rk := t.keyOf(a.key)
		a.hk, a.ks = hk, keyString(hk, rk)
		if seen[t] == nil {
			seen[t] = map[string]bool{}
		}
		if seen[t][a.ks] {
			return nil, validationf("Transaction request cannot include multiple operations on one item")
		}
		seen[t][a.ks] = true
		acts = append(acts, a)
	}
	if size > maxTxnBytes {
		return nil, validationf("Transaction request size has exceeded the maximum allowed size of 4 MB")
	}
	return acts, nil
}

// itemInvalid is what an action whose item or key does not fit the table (a key of
// the wrong type, a missing key, an item over 400 KB) makes of a transaction of n
// actions: AWS cancels it with a ValidationError reason for that action and None
// for every other (it stops at the first such action), rather than answer with a
// ValidationException as for a malformed request. Observed; public compatibility
// suites run against AWS check it (e.g. a Put of {"p": 7} on a table keyed by S).
func itemInvalid(n, i int, err error) error {
	reasons := noneReasons(n)
	reasons[i] = validationReason(err)
	return cancelled(reasons)
}

// runTxn commits acts atomically, or returns TransactionCanceledException.
func (db *DB) runTxn(acts []*txnAction) (*capacities, error) {
	tables := make([]*Table, len(acts))
	for i, a := range acts {
		tables[i] = a.t
	}
	j := db.begin()
	unlock := lockTables(tables)
	defer func() { unlock() }()
	defer func() { db.commit(j) }() // releases the journal on every return; the transaction commits first
	if err := checkLive(tables); err != nil {
		return nil, err
	}
	if err := db.evaluateTxn(acts, nil); err != nil {
		return nil, err
	}
	if db.opts.Conflicts {
		run := &txnRun{}
		for _, a := range acts {
			if a.t.extra.inflight == nil {
				a.t.extra.inflight = map[string]*txnRun{}
			}
			a.t.extra.inflight[a.ks] = run
		}
		unlock()
		time.Sleep(db.opts.ConflictWindow)
		unlock = lockTables(tables)
		for _, a := range acts {
			if a.t.extra.inflight[a.ks] == run {
				delete(a.t.extra.inflight, a.ks)
			}
		}
		if err := checkLive(tables); err != nil {
			return nil, err
		}
		// Nothing else could write the items while they were marked, but the TTL
		// sweeper may have: evaluate again under the locks we now hold.
		if err := db.evaluateTxn(acts, nil); err != nil {
			return nil, err
		}
	}
	cs := &capacities{}
	var reqs []budgetReq
	for _, a := range acts {
		if a.kind == "ConditionCheck" {
			// Charged as a transactional read of the item (2 RCU per 4 KB): the docs do
			// not say what a ConditionCheck costs; this is our reading, not verified.
			c := cs.of(a.t.Name, false)
			c.units += readUnits(sizeOf(a.old), true) * 2
			continue
		}
		c := cs.of(a.t.Name, true)
		before := c.units
		c.addWrite(a.t, a.old, a.next, 2)
		reqs = append(reqs, budgetReq{a.t, a.hk, c.units - before})
	}
	// A partition over its budget cancels the transaction: AWS's TransactionCanceledException
	// lists "insufficient provisioned capacity" among its causes, with the reason code
	// ProvisionedThroughputExceeded (API_TransactWriteItems, CancellationReason codes).
	if i := db.takeBudgets(reqs); i >= 0 {
		reasons := noneReasons(len(acts))
		j := -1
		for k, a := range acts {
			if a.kind != "ConditionCheck" {
				j++
			}
			if j == i {
				reasons[k] = CancellationReason{Code: "ProvisionedThroughputExceeded", Message: "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."}
				break
			}
		}
		return nil, cancelled(reasons)
	}
	now := db.now()
	for _, a := range acts {
		if a.kind != "ConditionCheck" {
			a.t.writeLocked(a.key, a.next, nil, now, j)
		}
	}
	err := db.commit(j)
	j = nil
	if err != nil {
		return nil, err
	}
	return cs, nil
}

func sizeOf(it attr.Item) int {
	if it == nil {
		return 0
	}
	return it.Size()
}

func checkLive(tables []*Table) error {
	for _, t := range tables {
		if t.deleted {
			return notFoundf("Requested resource not found: Table: %s not found", t.Name)
		}
	}
	return nil
}

func noneReasons(n int) []CancellationReason {
	r := make([]CancellationReason, n)
	for i := range r {
		r[i].Code = "None"
	}
	return r
}

// evaluateTxn reads every action's item, checks its condition and computes what it
// writes; it returns TransactionCanceledException when any action cannot go ahead.
// The caller holds the tables' write locks.
func (db *DB) evaluateTxn(acts []*txnAction, self *txnRun) error {
	reasons := noneReasons(len(acts))
	failed := false
	for i, a := range acts {
		if m := a.t.extra.inflight[a.ks]; m != nil && m != self {
			reasons[i] = CancellationReason{Code: "TransactionConflict", Message: "Transaction is ongoing for the item"}
			failed = true
			continue
		}
		a.old = a.t.getLocked(a.key)
		if a.cond != nil {
			ok, err := a.cond.Eval(a.old)
			if err != nil {
				reasons[i] = validationReason(err)
				failed = true
				continue
			}
			if !ok {
				reasons[i] = CancellationReason{Code: "ConditionalCheckFailed", Message: "The conditional request failed"}
				if a.failOld == "ALL_OLD" && a.old != nil {
					reasons[i].Item = a.old
				}
				failed = true
				continue
			}
		}
		switch a.kind {
		case "Put":
			a.next = a.item
		case "Delete":
			a.next = nil
		case "Update":
			next, err := applyUpdate(a.t, a.update, a.key, a.old)
			if err != nil {
				reasons[i] = validationReason(err)
				failed = true
				continue
			}
			a.next = next
		}
	}
	if failed {
		return cancelled(reasons)
	}
	return nil
}

func validationReason(err error) CancellationReason {
	msg := err.Error()
	if e, ok := exprError(err).(*Error); ok {
		msg = e.Message
	}
	return CancellationReason{Code: "ValidationError", Message: msg}
}

// cancelled is TransactionCanceledException with AWS's message listing the reasons.
func cancelled(reasons []CancellationReason) *Error {
	codes := make([]string, len(reasons))
	for i, r := range reasons {
		codes[i] = r.Code
	}
	e := newError(http.StatusBadRequest, CodeTransactionCanceled, "Transaction cancelled, please refer cancellation reasons for specific reasons [%s]", strings.Join(codes, ", "))
	e.Reasons = reasons
	return e
}

// ---- ClientRequestToken ----

// tokenTable remembers the transactions' client tokens: running, or succeeded within
// tokenTTL (with their output, which a repeat gets again without any change).
type tokenTable struct {
	m    map[string]*tokenEntry
	done []*tokenEntry // in completion order, so expiry pops from the front
}

type tokenEntry struct {
	token   string
	hash    [32]byte
	running bool
	at      time.Time
	out     any
}

func (tt *tokenTable) init() { tt.m = map[string]*tokenEntry{} }

// beginToken registers token for a transaction with parameters hash. It returns the
// output to repeat when the token already succeeded with these parameters, or the
// error AWS gives for a token in use.
func (e *dbExtensions) beginToken(token string, hash [32]byte, now time.Time) (any, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tt := &e.tokens
	for len(tt.done) > 0 && now.Sub(tt.done[0].at) >= tokenTTL {
		if cur := tt.m[tt.done[0].token]; cur == tt.done[0] {
			delete(tt.m, cur.token)
		}
		tt.done = tt.done[1:]
	}
	if prev := tt.m[token]; prev != nil {
		if prev.hash != hash {
			return nil, newError(http.StatusBadRequest, CodeIdempotentMismatch, "Request parameters do not match the parameters of a previous request with the same client token (%s)", token)
		}
		if prev.running {
			return nil, newError(http.StatusBadRequest, CodeTransactionInProgress, "The transaction with the given request token is already in progress.")
		}
		return prev.out, nil
	}
	tt.m[token] = &tokenEntry{token: token, hash: hash, running: true}
	return nil, nil
}

// endToken records the outcome: a success stays idempotent for tokenTTL, a failure
// frees the token for a retry.
func (e *dbExtensions) endToken(token string, out any, ok bool, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	te := e.tokens.m[token]
	if te == nil {
		return
	}
	if !ok {
		delete(e.tokens.m, token)
		return
	}
	te.running, te.at, te.out = false, now, out
	e.tokens.done = append(e.tokens.done, te)
}

// ---- TransactGetItems ----

type transactGetInput struct {
	TransactItems []struct {
		Get *struct {
			TableName            string
			Key                  attr.Item
			ProjectionExpression *string
			exprParams
		}
	}
	ReturnConsumedCapacity string
}

func opTransactGetItems(ctx context.Context, db *DB, body []byte) (any, error) {
	var in transactGetInput
	if err := decodeInput(body, &in); err != nil {
		return nil, err
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if len(in.TransactItems) == 0 || len(in.TransactItems) > maxTxnActions {
		return nil, validationf("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to %d and greater than or equal to 1", maxTxnActions)
	}
	type getAct struct {
		t   *Table
		key attr.Item
		ks  string
		pr  *expr.Projection
	}
	acts := make([]getAct, len(in.TransactItems))
	tables := make([]*Table, 0, len(acts))
	names := make([]string, 0, len(acts))
	seen := map[*Table]map[string]bool{}
	for i, ti := range in.TransactItems {
		g := ti.Get
		if g == nil {
			return nil, validationf("1 validation error detected: Value null at 'transactItems.%d.member.get' failed to satisfy constraint: Member must not be null", i+1)
		}
		t, err := db.table(g.TableName)
		if err != nil {
			return nil, err
		}
		p, err := g.params()
		if err != nil {
			return nil, err
		}
		pr, err := parseProjection(g.ProjectionExpression, p)
		if err != nil {
			return nil, err
		}
		if err := p.CheckUnused(); err != nil {
			return nil, exprError(err)
		}
		if err := t.validateKey(g.Key); err != nil {
			return nil, err
		}
		ks := keyString(t.keyOf(g.Key))
		if seen[t] == nil {
			seen[t] = map[string]bool{}
		}
		if seen[t][ks] {
			return nil, validationf("Transaction request cannot include multiple operations on one item")
		}
		seen[t][ks] = true
		acts[i] = getAct{t: t, key: g.Key, ks: ks, pr: pr}
		tables = append(tables, t)
		names = append(names, t.Name)
	}
	if err := db.injectedFault(ctx, names...); err != nil {
		return nil, err
	}
	items := make([]attr.Item, len(acts))
	unlock := rlockTables(tables)
	if err := checkLive(tables); err != nil {
		unlock()
		return nil, err
	}
	reasons := noneReasons(len(acts))
	conflict := false
	for i, a := range acts {
		if a.t.extra.inflight[a.ks] != nil {
			reasons[i] = CancellationReason{Code: "TransactionConflict", Message: "Transaction is ongoing for the item"}
			conflict = true
			continue
		}
		items[i] = a.t.getLocked(a.key)
	}
	unlock()
	if conflict {
		return nil, cancelled(reasons)
	}
	cs := &capacities{}
	resp := make([]map[string]any, len(acts))
	for i, a := range acts {
		cs.of(a.t.Name, false).units += readUnits(sizeOf(items[i]), true) * 2
		resp[i] = map[string]any{}
		if items[i] != nil {
			resp[i]["Item"] = project(a.pr, items[i])
		}
	}
	out := map[string]any{"Responses": resp}
	if r := cs.report(in.ReturnConsumedCapacity); r != nil {
		out["ConsumedCapacity"] = r
	}
	return out, nil
}
