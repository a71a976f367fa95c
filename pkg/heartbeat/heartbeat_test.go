package heartbeat_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/heartbeat"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// Write appends a chained, declared event on the heartbeat's reserved chain
// through the ordinary Emit path: two beats form a chain of two.
func TestWriteAppendsToTheHeartbeatChain(t *testing.T) {
	ctx := context.Background()
	db := localaws.DynamoDB(t)
	table := localaws.UniqueName(t, "events")
	localaws.CreateTable(t, db, eventstore.TableSchema(table))
	cat, err := heartbeat.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	store, err := eventstore.New(db, eventstore.Config{Table: table, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	first, err := heartbeat.Write(ctx, store)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	second, err := heartbeat.Write(ctx, store)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if first.TenantID != tenancy.HeartbeatTenant || first.Type != keys.HeartbeatType || first.SchemaVersion != 1 {
		t.Errorf("first beat: tenant %q type %q v%d, want %q %q v1", first.TenantID, first.Type, first.SchemaVersion, tenancy.HeartbeatTenant, keys.HeartbeatType)
	}
	if second.Seq != first.Seq+1 || second.PrevHash != first.Hash {
		t.Errorf("second beat: seq %d prev_hash %q, want seq %d chained to %q", second.Seq, second.PrevHash, first.Seq+1, first.Hash)
	}
	page, err := store.Events(ctx, tenancy.HeartbeatTenant, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 2 {
		t.Fatalf("log holds %d heartbeats, want 2", len(page.Events))
	}
	if w, _ := page.Events[0].Payload["writer"].(string); w != keys.FnHeartbeat {
		t.Errorf("payload writer = %q, want %q", w, keys.FnHeartbeat)
	}
}

// A team's emitter cannot write on the heartbeat's chain by binding it as a
// tenant.
func TestTeamCannotBindHeartbeatChain(t *testing.T) {
	if _, err := tenancy.WithTenant(context.Background(), tenancy.HeartbeatTenant); err == nil {
		t.Fatal("WithTenant(heartbeat chain) = nil error, want it refused")
	}
}

// OnBeat writes HeartbeatsDelivered and HeartbeatLag (by Lane) as EMF for a
// beat of the heartbeat's chain, and nothing for a beat on any other chain.
func TestOnBeatRecordsArrival(t *testing.T) {
	var out, logs obstest.Buffer
	committed := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	m := &heartbeat.Monitor{Metrics: obs.NewMetrics(&out), Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Now: func() time.Time { return committed.Add(1500 * time.Millisecond) }}
	beat := envelope.Envelope{ID: "e1", TenantID: tenancy.HeartbeatTenant, Type: keys.HeartbeatType, Seq: 7, OccurredAt: committed.Format(time.RFC3339Nano)}
	if err := m.OnBeat(context.Background(), beat); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, l := range out.Lines() {
		var doc map[string]any
		if err := json.Unmarshal([]byte(l), &doc); err != nil {
			t.Fatalf("EMF line %q: %v", l, err)
		}
		if doc["Lane"] != string(catalog.Durable) {
			t.Errorf("EMF line %s: Lane = %v, want DURABLE", l, doc["Lane"])
		}
		for _, name := range []string{keys.MetricHeartbeatsDelivered, keys.MetricHeartbeatLag} {
			if v, ok := doc[name].(float64); ok {
				got[name] = v
			}
		}
	}
	if got[keys.MetricHeartbeatsDelivered] != 1 || got[keys.MetricHeartbeatLag] != 1500 {
		t.Errorf("metrics %v, want HeartbeatsDelivered 1 and HeartbeatLag 1500", got)
	}

	before := len(out.Lines())
	forged := beat
	forged.TenantID = "acme"
	if err := m.OnBeat(context.Background(), forged); err != nil {
		t.Fatal(err)
	}
	if after := out.Lines(); len(after) != before {
		t.Errorf("a heartbeat on tenant acme was counted: %s", strings.Join(after[before:], "\n"))
	}
	if !strings.Contains(logs.String(), `"level":"WARN"`) || !strings.Contains(logs.String(), "not counted") {
		t.Errorf("a heartbeat on tenant acme: logs %s, want a WARN line saying it is not counted", logs.String())
	}
}
