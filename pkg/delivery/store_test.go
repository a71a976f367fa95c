package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/delivery"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// stateTable creates a state table (pk/sk strings, TTL on expires_at) in the local DynamoDB.
func stateTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	db := localaws.DynamoDB(t)
	desc := localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state")))
	return db, aws.ToString(desc.TableName)
}

// stores runs f against the in-memory fake and against the local DynamoDB.
func stores(t *testing.T, f func(t *testing.T, newStore func(t *testing.T) delivery.Store)) {
	t.Run("memory", func(t *testing.T) {
		f(t, func(*testing.T) delivery.Store { return delivery.NewMemoryStore() })
	})
	t.Run("dynamodb", func(t *testing.T) {
		f(t, func(t *testing.T) delivery.Store {
			db, table := stateTable(t)
			return delivery.NewDynamoStore(db, table)
		})
	})
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func req(k delivery.Key, token string, now time.Time, lease time.Duration) delivery.ClaimRequest {
	return delivery.ClaimRequest{Key: k, Tenant: "t1", Type: "order.paid", Seq: 7, SchemaVersion: 1, Token: token,
		Now: now, LeaseUntil: now.Add(lease), ExpiresAt: now.Add(30 * 24 * time.Hour)}
}

// TestStoreConformance is the contract every Store must keep.
func TestStoreConformance(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		ctx := context.Background()
		st := newStore(t)
		k := delivery.Key{EventID: "e1", Subscription: "s.one"}

		c, err := st.Claim(ctx, req(k, "a", t0, time.Minute))
		if err != nil || !c.Acquired || c.TakenOver || c.Attempts != 1 {
			t.Fatalf("first claim: got %+v, %v; want acquired, attempt 1", c, err)
		}
		// Held: a second claim within the lease reports the lease.
		c, err = st.Claim(ctx, req(k, "b", t0.Add(30*time.Second), time.Minute))
		if err != nil || c.Acquired || c.Status != delivery.StatusPending || !c.LeaseUntil.Equal(t0.Add(time.Minute)) {
			t.Fatalf("claim under lease: got %+v, %v; want pending until %v", c, err, t0.Add(time.Minute))
		}
		// Expired: taken over.
		c, err = st.Claim(ctx, req(k, "b", t0.Add(2*time.Minute), time.Minute))
		if err != nil || !c.Acquired || !c.TakenOver || c.Attempts != 2 {
			t.Fatalf("claim after lease: got %+v, %v; want taken over, attempt 2", c, err)
		}
		// The old holder lost its lease.
		if err := st.Complete(ctx, k, "a", t0, t0.Add(time.Hour)); !errors.Is(err, delivery.ErrLeaseLost) {
			t.Fatalf("complete by old holder: got %v, want ErrLeaseLost", err)
		}
		if err := st.Complete(ctx, k, "b", t0, t0.Add(time.Hour)); err != nil {
			t.Fatalf("complete: %v", err)
		}
		c, err = st.Claim(ctx, req(k, "c", t0.Add(time.Hour), time.Minute))
		if err != nil || c.Acquired || c.Status != delivery.StatusCompleted {
			t.Fatalf("claim of completed: got %+v, %v; want completed, not acquired", c, err)
		}
		rec, ok, err := st.Get(ctx, k)
		if err != nil || !ok || rec.Status != delivery.StatusCompleted || !rec.ExpiresAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("get completed: got %+v %v %v; want completed expiring %v", rec, ok, err, t0.Add(time.Hour))
		}

		// Dead: claim, kill, then the dead letter is listed and counted.
		k2 := delivery.Key{EventID: "e1", Subscription: "s.two"}
		if _, err := st.Claim(ctx, req(k2, "x", t0, time.Minute)); err != nil {
			t.Fatal(err)
		}
		dl := delivery.DeadLetter{Tenant: "t1", EventID: "e1", Subscription: "s.two", Type: "order.paid", Seq: 7, SchemaVersion: 1,
			Error: "boom", Attempts: 3, DeadAt: t0}
		if err := st.Kill(ctx, k2, "y", dl, false); !errors.Is(err, delivery.ErrLeaseLost) {
			t.Fatalf("kill by a non-holder: got %v, want ErrLeaseLost", err)
		}
		if err := st.Kill(ctx, k2, "x", dl, false); err != nil {
			t.Fatalf("kill: %v", err)
		}
		c, err = st.Claim(ctx, req(k2, "z", t0.Add(time.Hour), time.Minute))
		if err != nil || c.Acquired || c.Status != delivery.StatusDead {
			t.Fatalf("claim of dead: got %+v, %v; want dead, not acquired", c, err)
		}
		rec, _, _ = st.Get(ctx, k2)
		if rec.Status != delivery.StatusDead || rec.Error != "boom" || !rec.ExpiresAt.IsZero() {
			t.Fatalf("dead claim: got %+v; want dead, error boom, no expiry", rec)
		}
		letters, _, err := st.DeadLetters(ctx, "t1", "", 0)
		if err != nil || len(letters) != 1 {
			t.Fatalf("dead letters: got %v, %v; want 1", letters, err)
		}
		if got := letters[0]; got.EventID != "e1" || got.Subscription != "s.two" || got.Seq != 7 || got.Error != "boom" || got.Attempts != 3 || !got.DeadAt.Equal(t0) {
			t.Errorf("dead letter: got %+v", got)
		}
		if n, err := st.CountDeadLetters(ctx, "t1"); err != nil || n != 1 {
			t.Errorf("count t1: got %d, %v; want 1", n, err)
		}
		if n, err := st.CountDeadLetters(ctx, "t2"); err != nil || n != 0 {
			t.Errorf("count t2: got %d, %v; want 0 (dead letters are tenant-scoped)", n, err)
		}

		// Replay: only a dead claim can be taken for replay.
		if _, err := st.ClaimDead(ctx, req(delivery.Key{EventID: "nope", Subscription: "s.two"}, "r", t0, time.Minute)); !errors.Is(err, delivery.ErrNotDead) {
			t.Errorf("replay claim of an absent claim: got %v, want ErrNotDead", err)
		}
		if c, err := st.ClaimDead(ctx, req(k, "r", t0, time.Minute)); err != nil || c.Acquired || c.Status != delivery.StatusCompleted {
			t.Errorf("replay claim of a completed claim: got %+v, %v; want completed, not acquired", c, err)
		}
		c, err = st.ClaimDead(ctx, req(k2, "r", t0.Add(2*time.Hour), time.Minute))
		if err != nil || !c.Acquired {
			t.Fatalf("replay claim of dead: got %+v, %v; want acquired", c, err)
		}
		// Failing again keeps it dead and counts the replay.
		if err := st.Kill(ctx, k2, "r", dl, true); err != nil {
			t.Fatal(err)
		}
		letters, _, _ = st.DeadLetters(ctx, "t1", "", 0)
		if len(letters) != 1 || letters[0].Replays != 1 {
			t.Fatalf("after a failed replay: got %+v; want one letter with Replays 1", letters)
		}
		c, _ = st.ClaimDead(ctx, req(k2, "r2", t0.Add(3*time.Hour), time.Minute))
		if err := st.Resolve(ctx, k2, "t1", "r2", t0, t0.Add(time.Hour)); err != nil || !c.Acquired {
			t.Fatalf("resolve: %v (claim %+v)", err, c)
		}
		if n, _ := st.CountDeadLetters(ctx, "t1"); n != 0 {
			t.Errorf("count after resolve: got %d, want 0", n)
		}
		rec, _, _ = st.Get(ctx, k2)
		if rec.Status != delivery.StatusCompleted {
			t.Errorf("claim after resolve: got %s, want completed", rec.Status)
		}
	})
}

// TestStoreClaimRace: of many concurrent claims of one key, exactly one wins.
func TestStoreClaimRace(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		st := newStore(t)
		k := delivery.Key{EventID: "race", Subscription: "s"}
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := st.Claim(context.Background(), req(k, fmt.Sprint(i), t0, time.Minute))
				if err != nil {
					t.Error(err)
					return
				}
				if c.Acquired {
					mu.Lock()
					won++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Errorf("winners: got %d, want 1", won)
		}
	})
}

func TestDeadLettersPaging(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		ctx := context.Background()
		st := newStore(t)
		for i := range 5 {
			k := delivery.Key{EventID: fmt.Sprintf("e%d", i), Subscription: "s"}
			if _, err := st.Claim(ctx, req(k, "tok", t0, time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := st.Kill(ctx, k, "tok", delivery.DeadLetter{Tenant: "t1", EventID: k.EventID, Subscription: "s", Error: "x", DeadAt: t0}, false); err != nil {
				t.Fatal(err)
			}
		}
		var all []string
		cursor := ""
		for range 10 {
			page, next, err := st.DeadLetters(ctx, "t1", cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page {
				all = append(all, d.EventID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if fmt.Sprint(all) != "[e0 e1 e2 e3 e4]" {
			t.Errorf("paged dead letters: got %v, want [e0 e1 e2 e3 e4]", all)
		}
	})
}
