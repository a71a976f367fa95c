package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// TestStateConformance is the contract every State keeps, run against the
// in-memory fake and the local DynamoDB.
func TestStateConformance(t *testing.T) {
	for name, newState := range map[string]func(t *testing.T) reconcile.State{
		"memory": func(*testing.T) reconcile.State { return reconcile.NewMemoryState() },
		"dynamodb": func(t *testing.T) reconcile.State {
			db := localaws.DynamoDB(t)
			desc := localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state")))
			return reconcile.NewDynamoState(db, aws.ToString(desc.TableName))
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newState(t)
			if cp, err := st.Checkpoint(ctx, "acme"); cp != nil || err != nil {
				t.Fatalf("no checkpoint yet: got %v, %v; want nil, nil", cp, err)
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(st.AdvanceCheckpoint(ctx, "acme", reconcile.Checkpoint{Seq: 10, Hash: "h10"}))
			must(st.AdvanceCheckpoint(ctx, "acme", reconcile.Checkpoint{Seq: 5, Hash: "h5"}))   // never back
			must(st.AdvanceCheckpoint(ctx, "acme", reconcile.Checkpoint{Seq: 10, Hash: "hX"}))  // nor sideways
			must(st.AdvanceCheckpoint(ctx, "globex", reconcile.Checkpoint{Seq: 1, Hash: "g1"})) // per tenant
			if cp, err := st.Checkpoint(ctx, "acme"); err != nil || cp == nil || *cp != (reconcile.Checkpoint{Seq: 10, Hash: "h10"}) {
				t.Errorf("checkpoint: got %+v, %v; want seq 10 h10", cp, err)
			}
			must(st.AdvanceCheckpoint(ctx, "acme", reconcile.Checkpoint{Seq: 11, Hash: "h11"}))
			if cp, _ := st.Checkpoint(ctx, "acme"); cp == nil || cp.Seq != 11 {
				t.Errorf("checkpoint after advancing: got %+v, want seq 11", cp)
			}

			exp := time.Unix(1795981500, 0)
			w := reconcile.Walk{ID: "w1", Tenant: "acme", Mode: reconcile.Full, Seq: 7, Hash: "h7", Verified: 7, AnchorSeq: 0, ExpiresAt: exp}
			must(st.SaveWalk(ctx, w))
			got, err := st.Walk(ctx, "acme", "w1")
			if err != nil || got == nil || *got != w {
				t.Errorf("walk: got %+v, %v; want %+v", got, err, w)
			}
			if got, err := st.Walk(ctx, "globex", "w1"); got != nil || err != nil {
				t.Errorf("walk of another tenant: got %+v, %v; want nil, nil", got, err)
			}
		})
	}
}
