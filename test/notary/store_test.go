package notary_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/notary"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// TestStoreConformance is the contract every notary Store keeps, run against
// the in-memory fake and the local DynamoDB: a state reads back as saved,
// and a save from a stale read fails with ErrConflict.
func TestStoreConformance(t *testing.T) {
	for name, newStore := range map[string]func(t *testing.T) notary.Store{
		"memory": func(*testing.T) notary.Store { return &notary.MemoryStore{} },
		"dynamodb": func(t *testing.T) notary.Store {
			db := localaws.DynamoDB(t)
			desc := localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state")))
			return notary.NewDynamoStore(db, aws.ToString(desc.TableName))
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			if st, err := s.Load(ctx, "acme"); st != nil || err != nil {
				t.Fatalf("no state yet: got %+v, %v; want nil, nil", st, err)
			}
			st := notary.NewState("acme")
			st.Seq, st.Hash, st.HeadSeq, st.HeadHash, st.Signed, st.Since = 4, "h4", 5, "h5", 4, 2
			st.Pending = []notary.Pending{{Seq: 5, PrevHash: "h4", Hash: "h5"}}
			st.Applied = []string{"ev1", "ev2"}
			st.StreamSeq, st.Findings, st.FirstFinding, st.LastFinding, st.Broken = "4421584500000000017450439091", 2, "rewrite at seq 8: y", "planted at seq 9: x", true
			if err := s.Save(ctx, st); err != nil {
				t.Fatal(err)
			}
			if st.Version != 1 {
				t.Fatalf("version after the first save = %d, want 1", st.Version)
			}
			got, err := s.Load(ctx, "acme")
			if err != nil || !reflect.DeepEqual(got, st) {
				t.Fatalf("load: got %+v, %v; want %+v", got, err, st)
			}
			stale := *got
			got.Seq = 5
			if err := s.Save(ctx, got); err != nil {
				t.Fatal(err)
			}
			if err := s.Save(ctx, &stale); !errors.Is(err, notary.ErrConflict) {
				t.Fatalf("save from a stale read: err = %v, want ErrConflict", err)
			}
			if other, err := s.Load(ctx, "globex"); other != nil || err != nil {
				t.Errorf("another chain: got %+v, %v; want nil, nil", other, err)
			}
		})
	}
}
