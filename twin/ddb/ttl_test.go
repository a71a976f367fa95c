package ddb

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

func (e *streamEnv) enableTTL(t *testing.T, table, name string, on bool) {
	t.Helper()
	_, err := e.ddb.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(name), Enabled: aws.Bool(on)},
	})
	if err != nil {
		t.Fatalf("UpdateTimeToLive %s %v: %v", table, on, err)
	}
}

func ttlItem(pk string, exp *attr.Value) attr.Item {
	it := attr.Item{"pk": attr.Str(pk)}
	if exp != nil {
		it["exp"] = exp
	}
	return it
}

func epoch(t time.Time) *attr.Value { return attr.Num(strconv.FormatInt(t.Unix(), 10)) }

func (e *streamEnv) has(t *testing.T, table, pk string) bool {
	t.Helper()
	tb, err := e.db.table(table)
	if err != nil {
		t.Fatal(err)
	}
	tb.mu.RLock()
	defer tb.mu.RUnlock()
	return tb.getLocked(key(pk)) != nil
}

func TestTTLSweepDeletesExpiredItems(t *testing.T) {
	e := newStreamEnv(t, Options{})
	arn := e.createTable(t, "ttl", "NEW_AND_OLD_IMAGES")
	e.enableTTL(t, "ttl", "exp", true)
	now := e.clock.Now()
	items := []attr.Item{
		ttlItem("past", epoch(now.Add(-10*time.Second))),
		ttlItem("now", epoch(now)), // equal to now: not expired yet ("less than the current time")
		ttlItem("fraction", attr.Num(strconv.FormatInt(now.Unix()-1, 10)+".5")),
		ttlItem("future", epoch(now.Add(100*time.Second))),
		ttlItem("string", attr.Str(strconv.FormatInt(now.Unix()-10, 10))), // not a Number: never expires
		ttlItem("ancient", epoch(now.AddDate(-6, 0, 0))),                  // over five years old: left alone
		ttlItem("noattr", nil),
	}
	for _, it := range items {
		e.write(t, "ttl", key(it["pk"].S), it)
	}
	if n := e.db.SweepTTL(); n != 2 {
		t.Fatalf("SweepTTL deleted %d, want 2 (past, fraction)", n)
	}
	for pk, want := range map[string]bool{"past": false, "now": true, "fraction": false, "future": true, "string": true, "ancient": true, "noattr": true} {
		if got := e.has(t, "ttl", pk); got != want {
			t.Errorf("item %s present %v, want %v", pk, got, want)
		}
	}
	if n := e.db.SweepTTL(); n != 0 {
		t.Errorf("a second sweep deleted %d, want 0", n)
	}

	recs := e.readAll(t, arn)
	if len(recs) != len(items)+2 {
		t.Fatalf("stream has %d records, want %d INSERTs and 2 REMOVEs", len(recs), len(items))
	}
	for i, r := range recs {
		if i < len(items) {
			if r.EventName != types.OperationTypeInsert || r.UserIdentity != nil {
				t.Errorf("record %d: %s by %+v, want an INSERT by the user", i, r.EventName, r.UserIdentity)
			}
			continue
		}
		if r.EventName != types.OperationTypeRemove {
			t.Errorf("record %d: %s, want REMOVE", i, r.EventName)
		}
		if r.UserIdentity == nil || aws.ToString(r.UserIdentity.Type) != "Service" || aws.ToString(r.UserIdentity.PrincipalId) != "dynamodb.amazonaws.com" {
			t.Errorf("record %d: userIdentity %+v, want Service dynamodb.amazonaws.com", i, r.UserIdentity)
		}
		if r.Dynamodb.OldImage["exp"] == nil || r.Dynamodb.NewImage != nil {
			t.Errorf("record %d: a TTL REMOVE carries the old image and no new one", i)
		}
	}

	// Time passes: "now" expires just after its second; the future item at 100 s is
	// still there at 100 s and gone a moment later.
	e.clock.Advance(100 * time.Second)
	if n := e.db.SweepTTL(); n != 1 || e.has(t, "ttl", "now") || !e.has(t, "ttl", "future") {
		t.Errorf("100 s later: deleted %d, want only the item that was at now", n)
	}
	e.clock.Advance(time.Millisecond)
	if n := e.db.SweepTTL(); n != 1 || e.has(t, "ttl", "future") {
		t.Errorf("just after its TTL: deleted %d, want the future item", n)
	}
}

func TestTTLOffDeletesNothing(t *testing.T) {
	e := newStreamEnv(t, Options{})
	e.createTable(t, "ttloff", "") // no stream either: the sweep must not need one
	expired := ttlItem("a", epoch(e.clock.Now().Add(-time.Minute)))
	e.write(t, "ttloff", key("a"), expired)
	if n := e.db.SweepTTL(); n != 0 {
		t.Fatalf("TTL never enabled: deleted %d", n)
	}
	e.enableTTL(t, "ttloff", "exp", true)
	e.enableTTL(t, "ttloff", "exp", false)
	if n := e.db.SweepTTL(); n != 0 || !e.has(t, "ttloff", "a") {
		t.Fatalf("TTL turned off again: deleted %d", n)
	}
	e.enableTTL(t, "ttloff", "exp", true)
	if n := e.db.SweepTTL(); n != 1 {
		t.Fatalf("TTL on, no stream: deleted %d, want 1", n)
	}
}

func TestTTLSkipsItemsInFlight(t *testing.T) {
	e := newStreamEnv(t, Options{})
	e.createTable(t, "ttltx", "KEYS_ONLY")
	e.enableTTL(t, "ttltx", "exp", true)
	e.write(t, "ttltx", key("a"), ttlItem("a", epoch(e.clock.Now().Add(-time.Minute))))
	tb, _ := e.db.table("ttltx")
	ks := keyString(attr.Str("a"), nil)
	tb.mu.Lock()
	if tb.extra.inflight == nil {
		tb.extra.inflight = map[string]*txnRun{}
	}
	tb.extra.inflight[ks] = &txnRun{}
	tb.mu.Unlock()
	if n := e.db.SweepTTL(); n != 0 || !e.has(t, "ttltx", "a") {
		t.Fatalf("an item a transaction holds: deleted %d", n)
	}
	tb.mu.Lock()
	delete(tb.extra.inflight, ks)
	tb.mu.Unlock()
	if n := e.db.SweepTTL(); n != 1 {
		t.Fatalf("once the transaction let go: deleted %d, want 1", n)
	}
}

func TestTTLSweepsInBatches(t *testing.T) {
	e := newStreamEnv(t, Options{})
	arn := e.createTable(t, "ttlmany", "KEYS_ONLY")
	e.enableTTL(t, "ttlmany", "exp", true)
	const n = 2*ttlBatch + 37
	for i := range n {
		k := strconv.Itoa(i)
		e.write(t, "ttlmany", key(k), ttlItem(k, epoch(e.clock.Now().Add(-time.Hour))))
	}
	if got := e.db.SweepTTL(); got != n {
		t.Fatalf("SweepTTL deleted %d, want %d", got, n)
	}
	removes := 0
	for _, r := range e.readAll(t, arn) {
		if r.EventName == types.OperationTypeRemove && r.UserIdentity != nil {
			removes++
		}
	}
	if removes != n {
		t.Fatalf("%d TTL REMOVE records, want %d", removes, n)
	}
}

func TestTTLBackgroundSweeper(t *testing.T) {
	e := newStreamEnv(t, Options{TTLSweep: 5 * time.Millisecond})
	arn := e.createTable(t, "ttlbg", "KEYS_ONLY")
	e.enableTTL(t, "ttlbg", "exp", true)
	e.write(t, "ttlbg", key("a"), ttlItem("a", epoch(e.clock.Now().Add(time.Minute))))
	e.write(t, "ttlbg", key("b"), ttlItem("b", epoch(e.clock.Now().Add(-time.Minute))))
	deadline := time.Now().Add(5 * time.Second)
	for e.has(t, "ttlbg", "b") {
		if time.Now().After(deadline) {
			t.Fatal("the background sweeper did not delete the expired item within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !e.has(t, "ttlbg", "a") {
		t.Fatal("the background sweeper deleted an item that has not expired")
	}
	recs := e.readAll(t, arn)
	if last := recs[len(recs)-1]; last.EventName != types.OperationTypeRemove || last.UserIdentity == nil {
		t.Fatalf("last record: %s by %+v, want the sweeper's REMOVE", last.EventName, last.UserIdentity)
	}
	// stop ends the sweeper and may be called again (Close, in the cleanup, does).
	e.db.bg.stop()
}

func TestTTLExpired(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 500_000_000, time.UTC)
	sec := now.Unix()
	for _, c := range []struct {
		v    *attr.Value
		want bool
	}{
		{nil, false},
		{attr.Str("1"), false},
		{attr.Num(strconv.FormatInt(sec, 10)), true},         // now is half a second past it
		{attr.Num(strconv.FormatInt(sec, 10) + ".5"), false}, // equal to now
		{attr.Num(strconv.FormatInt(sec, 10) + ".4"), true},
		{attr.Num(strconv.FormatInt(sec+1, 10)), false},
		{attr.Num(strconv.FormatInt(now.AddDate(-5, 0, 0).Unix()+1, 10)), true},
		{attr.Num(strconv.FormatInt(now.AddDate(-5, 0, 0).Unix()-1, 10)), false},
		{attr.Num("0"), false},
		{attr.Num("-5"), false},
		{attr.Num("1e40"), false},
	} {
		if got := ttlExpired(c.v, now); got != c.want {
			t.Errorf("ttlExpired(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}
