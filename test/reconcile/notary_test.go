package reconcile_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/notary"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
)

// notaryEnv is a reconcile env that compares the table with a notary view
// kept in its state table, as the stack runs it.
func notaryEnv(t *testing.T, tune func(*reconcile.Config)) (*env, *notary.DynamoStore) {
	t.Helper()
	lv := &lateViews{}
	e := newEnv(t, func(cfg *reconcile.Config) {
		cfg.Notary = lv
		cfg.State = notarized{cfg.State}
		if tune != nil {
			tune(cfg)
		}
	})
	lv.s = notary.NewDynamoStore(e.db, e.stateTable)
	return e, lv.s
}

// notarized keeps walk rows in its State and, as the stack's signed
// checkpoints, never lets a walk move a checkpoint: only the notary signs.
type notarized struct{ reconcile.State }

func (notarized) AdvanceCheckpoint(context.Context, string, reconcile.Checkpoint) error { return nil }
func (notarized) Notarized() bool                                                       { return true }

// lateViews is the notary store of a state table newEnv creates.
type lateViews struct{ s *notary.DynamoStore }

func (l *lateViews) Load(ctx context.Context, chainName string) (*notary.State, error) {
	return l.s.Load(ctx, chainName)
}

// saw records in the notary's view that it saw tenant appended through the
// head as it stands now.
func (e *env) saw(t *testing.T, views *notary.DynamoStore, tenant string, edit func(*notary.State)) {
	t.Helper()
	head := e.item(t, tenant, keys.HeadSeq)
	st, err := views.Load(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		st = notary.NewState(tenant)
	}
	st.Seq = num64(t, head[keys.AttrLastSeq])
	st.Hash = head[keys.AttrLastHash].(*types.AttributeValueMemberS).Value
	st.HeadSeq, st.HeadHash, st.Signed = st.Seq, st.Hash, st.Seq
	if edit != nil {
		edit(st)
	}
	if err := views.Save(context.Background(), st); err != nil {
		t.Fatal(err)
	}
}

func num64(t *testing.T, av types.AttributeValue) int64 {
	t.Helper()
	n, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("%v is not a number", av)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNotaryComparison: a walk that reaches the head compares it with what
// the notary saw appended. The table alone cannot show a consistent
// rewrite, a rollback to an older head or a chain the notary saw tampered;
// the comparison does, in both modes, and names it in findings.
func TestNotaryComparison(t *testing.T) {
	tests := []struct {
		name   string
		attack func(t *testing.T, e *env, views *notary.DynamoStore)
		reason chain.Reason
		seq    int64
		find   string
	}{
		{"consistent rewrite of the last events and the head", func(t *testing.T, e *env, _ *notary.DynamoStore) {
			e.rewrite(t, "acme", 4, 5)
		}, reconcile.ReasonNotaryMismatch, 5, "rewrite"},
		{"tail deleted and the head rolled back", func(t *testing.T, e *env, _ *notary.DynamoStore) {
			h3 := e.item(t, "acme", 3)[keys.AttrHash]
			e.deleteRow(t, "acme", 5)
			e.deleteRow(t, "acme", 4)
			head := e.item(t, "acme", keys.HeadSeq)
			head[keys.AttrLastSeq] = &types.AttributeValueMemberN{Value: "3"}
			head[keys.AttrLastHash] = h3
			e.put(t, head)
		}, reconcile.ReasonRollback, 4, "rollback"},
		{"the notary saw the chain tampered", func(t *testing.T, e *env, views *notary.DynamoStore) {
			e.saw(t, views, "acme", func(st *notary.State) {
				st.Broken, st.Findings, st.LastFinding = true, 1, "planted at seq 6: event row at seq 6 that the head (last_seq 5) does not cover"
			})
		}, reconcile.ReasonNotaryFinding, 6, "notary: planted at seq 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, views := notaryEnv(t, nil)
			e.emit(t, "acme", 5)
			e.saw(t, views, "acme", nil)
			want(t, e.get(t, "tenant=acme"), map[string]any{"chain_intact": true})
			tt.attack(t, e, views)
			for _, q := range []string{"tenant=acme", "tenant=acme&full=true"} {
				body := e.get(t, q)
				want(t, body, map[string]any{"chain_intact": false})
				if seq, reason := breakOf(t, body); seq != tt.seq || reason != string(tt.reason) {
					t.Errorf("%s: break at %d (%s), want %d (%s)", q, seq, reason, tt.seq, tt.reason)
				}
				fs, _ := body["findings"].([]any)
				if len(fs) == 0 || !strings.Contains(findingReason(fs[0]), tt.find) {
					t.Errorf("%s: findings %v, want one naming %q", q, body["findings"], tt.find)
				}
				if _, ok := body["notary"].(map[string]any); !ok {
					t.Errorf("%s: no notary view in %v", q, body)
				}
			}
		})
	}
}

// TestNotaryBehind: events the notary has not vouched for yet are counted
// (notary.unsigned), not a break; a chain it has no view of is a finding.
func TestNotaryBehind(t *testing.T) {
	e, views := notaryEnv(t, nil)
	e.emit(t, "acme", 3)
	body := e.get(t, "tenant=acme")
	want(t, body, map[string]any{"chain_intact": true})
	if fs, _ := body["findings"].([]any); len(fs) != 1 || !strings.Contains(findingReason(fs[0]), "no view") {
		t.Errorf("findings %v, want one saying the notary has no view", body["findings"])
	}
	e.saw(t, views, "acme", nil)
	e.emit(t, "acme", 2)
	body = e.get(t, "tenant=acme")
	want(t, body, map[string]any{"chain_intact": true})
	if v, _ := body["notary"].(map[string]any); v == nil || v["unsigned"] != 2.0 || v["seq"] != 3.0 {
		t.Errorf("notary view %v, want seq 3 with 2 unsigned", body["notary"])
	}
}

// TestWatermarkAboveHead: a DURABLE subscription settled past the head is
// free proof of a rollback (events were delivered that the log no longer
// has): the report breaks, names it, and counts ChainBreaks.
func TestWatermarkAboveHead(t *testing.T) {
	var marks *delivery.DynamoStore
	e := newEnv(t, func(cfg *reconcile.Config) {
		cfg.State = notarized{cfg.State}
		marks = cfg.DeadLetters.(*delivery.DynamoStore)
		cfg.Watermarks, cfg.Subscriptions = marks, []string{"s.email"}
	})
	e.emit(t, "acme", 5)
	if _, err := marks.Advance(context.Background(), "acme", "s.email", 1, 5, time.Now()); err != nil {
		t.Fatal(err)
	}
	want(t, e.get(t, "tenant=acme"), map[string]any{"chain_intact": true})
	h3 := e.item(t, "acme", 3)[keys.AttrHash]
	e.deleteRow(t, "acme", 5)
	e.deleteRow(t, "acme", 4)
	head := e.item(t, "acme", keys.HeadSeq)
	head[keys.AttrLastSeq] = &types.AttributeValueMemberN{Value: "3"}
	head[keys.AttrLastHash] = h3
	e.put(t, head)
	body := e.get(t, "tenant=acme")
	want(t, body, map[string]any{"chain_intact": false, "last_seq": 3})
	if seq, reason := breakOf(t, body); seq != 4 || reason != string(reconcile.ReasonRollback) {
		t.Errorf("break at %d (%s), want 4 (%s)", seq, reason, reconcile.ReasonRollback)
	}
	if fs, _ := body["findings"].([]any); len(fs) != 1 || !strings.Contains(findingReason(fs[0]), "s.email settled through seq 5") {
		t.Errorf("findings %v, want the watermark named", body["findings"])
	}
	if n := emfCount(t, e.emf, keys.MetricChainBreaks); n < 1 {
		t.Errorf("%s = %d, want >= 1", keys.MetricChainBreaks, n)
	}
}

// findingReason is a reconcile finding's reason (its words for a person).
func findingReason(f any) string {
	m, _ := f.(map[string]any)
	r, _ := m["reason"].(string)
	return r
}
