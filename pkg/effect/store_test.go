package effect_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// stateTable creates a state table in the local DynamoDB.
func stateTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	db := localaws.DynamoDB(t)
	desc := localaws.CreateTable(t, db, keys.PKSKTable(localaws.UniqueName(t, "state")))
	return db, aws.ToString(desc.TableName)
}

// stores runs f against the in-memory fake and against the local DynamoDB.
func stores(t *testing.T, f func(t *testing.T, st effect.Store)) {
	t.Run("memory", func(t *testing.T) { f(t, effect.NewMemoryStore()) })
	t.Run("dynamodb", func(t *testing.T) {
		db, table := stateTable(t)
		f(t, effect.NewDynamoStore(db, table))
	})
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func started(k effect.Key, token string) effect.Record {
	return effect.Record{Key: k, Tenant: "t1", Seq: 7, Status: effect.StatusStarted, Token: token, UpdatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
}

// TestStoreConformance is the contract every Store keeps.
func TestStoreConformance(t *testing.T) {
	stores(t, func(t *testing.T, st effect.Store) {
		ctx := context.Background()
		k := effect.Key{EventID: "e1", Subscription: "s.one", Name: "email"}

		prev, ok, err := st.Start(ctx, started(k, "a"), false)
		if err != nil || !ok || prev.Found() {
			t.Fatalf("first start: %+v %v %v; want started, nothing before", prev, ok, err)
		}
		// The same token again (a resend whose first attempt committed, or
		// the handler run again in the same delivery): its own record.
		prev, ok, err = st.Start(ctx, started(k, "a"), false)
		if err != nil || !ok || prev.Token != "a" || prev.Status != effect.StatusStarted {
			t.Fatalf("start again with its own token: %+v %v %v; want started over its own record", prev, ok, err)
		}
		// Another delivery: refused without takeover, taken over with it.
		prev, ok, err = st.Start(ctx, started(k, "b"), false)
		if err != nil || ok || prev.Token != "a" || prev.Status != effect.StatusStarted {
			t.Fatalf("start by another delivery, no takeover: %+v %v %v; want refused, a's record", prev, ok, err)
		}
		prev, ok, err = st.Start(ctx, started(k, "b"), true)
		if err != nil || !ok || prev.Token != "a" {
			t.Fatalf("takeover: %+v %v %v; want started, a's record before", prev, ok, err)
		}
		if err := st.Done(ctx, k, "a", t0, t0.Add(time.Hour)); !errors.Is(err, effect.ErrNotHeld) {
			t.Fatalf("done by the delivery taken over: %v, want ErrNotHeld", err)
		}
		if err := st.Done(ctx, k, "b", t0, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := st.Done(ctx, k, "b", t0, t0.Add(time.Hour)); err != nil {
			t.Fatalf("done again by the same token (a resend): %v", err)
		}
		r, found, err := st.Get(ctx, k)
		if err != nil || !found || r.Status != effect.StatusDone || r.Token != "b" || r.Tenant != "t1" || r.Seq != 7 || r.Attempts != 3 {
			t.Fatalf("after done: %+v %v %v; want done by b, tenant t1 seq 7, 3 starts", r, found, err)
		}
		// Done is final for every start, takeover or not.
		for _, takeover := range []bool{false, true} {
			if prev, ok, err := st.Start(ctx, started(k, "c"), takeover); err != nil || ok || prev.Status != effect.StatusDone {
				t.Fatalf("start after done (takeover %v): %+v %v %v; want refused, done", takeover, prev, ok, err)
			}
		}
		if err := st.Release(ctx, k, "b"); err != nil {
			t.Fatal(err)
		}
		if r, _, _ := st.Get(ctx, k); r.Status != effect.StatusDone {
			t.Fatalf("release of a done effect removed it: %+v", r)
		}
		if _, err := st.Decide(ctx, k, effect.StatusRedo, t0, t0); !errors.Is(err, effect.ErrNotUnknown) {
			t.Fatalf("decide on a done effect: %v, want ErrNotUnknown", err)
		}
	})
}

// TestStoreReleaseAndUnknown: a release frees only its own started record;
// an unknown record never expires and waits for a decision; redo lets the
// next start through, done is final.
func TestStoreReleaseAndUnknown(t *testing.T) {
	stores(t, func(t *testing.T, st effect.Store) {
		ctx := context.Background()
		k := effect.Key{EventID: "e2", Subscription: "s.one", Name: "charge"}
		if _, ok, err := st.Start(ctx, started(k, "a"), false); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if err := st.Release(ctx, k, "other"); err != nil {
			t.Fatal(err)
		}
		if _, found, _ := st.Get(ctx, k); !found {
			t.Fatal("another token's release removed the record")
		}
		if err := st.Release(ctx, k, "a"); err != nil {
			t.Fatal(err)
		}
		if _, found, _ := st.Get(ctx, k); found {
			t.Fatal("its own release left the record")
		}
		if err := st.Release(ctx, k, "a"); err != nil {
			t.Fatalf("release again (a resend after the delete committed): %v", err)
		}

		if _, ok, err := st.Start(ctx, started(k, "a"), false); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if err := st.MarkUnknown(ctx, k, "other", t0); !errors.Is(err, effect.ErrNotHeld) {
			t.Fatalf("mark unknown with another token: %v, want ErrNotHeld", err)
		}
		if err := st.MarkUnknown(ctx, k, "a", t0); err != nil {
			t.Fatal(err)
		}
		r, _, err := st.Get(ctx, k)
		if err != nil || r.Status != effect.StatusUnknown || !r.ExpiresAt.IsZero() {
			t.Fatalf("unknown: %+v %v; want unknown, no expiry", r, err)
		}
		for _, takeover := range []bool{false, true} {
			if prev, ok, err := st.Start(ctx, started(k, "b"), takeover); err != nil || ok || prev.Status != effect.StatusUnknown {
				t.Fatalf("start while unknown (takeover %v): %+v %v %v; want refused", takeover, prev, ok, err)
			}
		}
		if _, err := st.Decide(ctx, k, effect.StatusStarted, t0, t0); err == nil {
			t.Fatal("a decision other than redo or done was accepted")
		}
		if r, err := st.Decide(ctx, k, effect.StatusRedo, t0, t0); err != nil || r.Status != effect.StatusRedo {
			t.Fatalf("decide redo: %+v %v", r, err)
		}
		if prev, ok, err := st.Start(ctx, started(k, "b"), false); err != nil || !ok || prev.Status != effect.StatusRedo {
			t.Fatalf("start after redo: %+v %v %v; want started over the redo", prev, ok, err)
		}

		k2 := effect.Key{EventID: "e3", Subscription: "s.one", Name: "charge"}
		if _, _, err := st.Start(ctx, started(k2, "a"), false); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkUnknown(ctx, k2, "a", t0); err != nil {
			t.Fatal(err)
		}
		if r, err := st.Decide(ctx, k2, effect.StatusDone, t0, t0.Add(time.Hour)); err != nil || r.Status != effect.StatusDone || r.ExpiresAt.IsZero() {
			t.Fatalf("decide done: %+v %v; want done, expiring", r, err)
		}
		if _, ok, _ := st.Start(ctx, started(k2, "b"), true); ok {
			t.Fatal("started after an operator decided it was done")
		}
		missing := effect.Key{EventID: "nope", Subscription: "s.one", Name: "charge"}
		if _, err := st.Decide(ctx, missing, effect.StatusRedo, t0, t0); !errors.Is(err, effect.ErrNotUnknown) {
			t.Fatalf("decide on an absent effect: %v, want ErrNotUnknown", err)
		}
	})
}

func TestParseKey(t *testing.T) {
	k := effect.Key{EventID: "019a-e", Subscription: "notifications.order-email", Name: "email"}
	got, err := effect.ParseKey(k.String())
	if err != nil || got != k {
		t.Fatalf("ParseKey(%q) = %+v, %v", k.String(), got, err)
	}
	for _, bad := range []string{"", "a:b", "a:b:c:d", ":b:c", "a:b:Bad Name"} {
		if _, err := effect.ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}
