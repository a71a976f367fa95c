package reminders_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/examples/library/reminders"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// The same faults as the orders example's email, on the library's reminder,
// which is AtMostOnce: a reminder is sent once or, when its outcome is
// unknown, not at all and never silently: dead-lettered naming it, counted,
// until an operator decides, and then replayed as decided.

type lane struct {
	db      *dynamodb.Client
	table   string
	d       *delivery.Deliverer
	claims  *delivery.DynamoStore
	effects *effect.DynamoStore
	logs    *obstest.Buffer
	metrics *obstest.Buffer
}

func newLane(t *testing.T) *lane {
	t.Helper()
	db := localaws.DynamoDB(t)
	table := aws.ToString(localaws.CreateTable(t, db, keys.PKSKTable(localaws.UniqueName(t, "state"))).TableName)
	l := &lane{db: db, table: table, claims: delivery.NewDynamoStore(db, table), effects: effect.NewDynamoStore(db, table),
		logs: &obstest.Buffer{}, metrics: &obstest.Buffer{}}
	cat, err := library.App.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	log, metrics := obs.NewLogger(l.logs, "debug"), obs.NewMetrics(l.metrics)
	reg, err := catalog.NewRegistry(cat, reminders.Module.Bind(&reminders.Reminder{Logger: log}))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := effect.New(effect.Config{Store: l.effects, Logger: log, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	l.d, err = delivery.New(reg, delivery.Config{Store: l.claims, Effects: rec, Logger: log, Metrics: metrics,
		Backoff: time.Millisecond, LeaseGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func opened(t *testing.T) envelope.Envelope {
	t.Helper()
	p, err := envelope.NormalizePayload(loans.OpenedV1{LoanID: "l-1", Book: "Dune", Member: "m-7"})
	if err != nil {
		t.Fatal(err)
	}
	e := envelope.Envelope{ID: "0190c2a4-2222-7000-8000-000000000001", Type: loans.TypeOpened, TenantID: "branch-1", Seq: 1,
		OccurredAt: "2026-12-01T12:00:00Z", SchemaVersion: 1, PrevHash: strings.Repeat("0", 64), Hash: strings.Repeat("1", 64), Payload: p}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	return e
}

func effectKey(e envelope.Envelope) effect.Key {
	return effect.Key{EventID: e.ID, Subscription: reminders.Subscription, Name: reminders.EffectReminder}
}

// sent counts the reminder lines for e.
func (l *lane) sent(e envelope.Envelope) int {
	n := 0
	for _, line := range strings.Split(l.logs.String(), "\n") {
		var rec struct {
			Msg     string `json:"msg"`
			EventID string `json:"event_id"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == reminders.Sent && rec.EventID == e.ID {
			n++
		}
	}
	return n
}

func (l *lane) deliver(t *testing.T, e envelope.Envelope, within time.Duration) (delivery.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return l.d.Deliver(ctx, e)
}

func (l *lane) claim(t *testing.T, e envelope.Envelope) delivery.ClaimRecord {
	t.Helper()
	c, _, err := l.claims.Get(context.Background(), delivery.Key{EventID: e.ID, Subscription: reminders.Subscription})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReminderStartAnswerLost is the library's one-fault reproduction: the
// reminder's record commits and its answer is lost. The example took any
// refused write for an earlier delivery's and returned nil: no reminder, no
// log line, the claim completed. The effect recognises its own token.
func TestReminderStartAnswerLost(t *testing.T) {
	l := newLane(t)
	e := opened(t)
	localaws.InjectFault(t, l.db, localaws.Fault{Action: "UpdateItem", Table: l.table, Match: `"` + keys.StateEffectPrefix, Kind: "drop"})
	if res, err := l.deliver(t, e, 10*time.Second); err != nil || res.RetryLater() || res.Subscriptions[0].Outcome != delivery.Completed {
		t.Fatalf("deliver: %+v %v", res, err)
	}
	if n := l.sent(e); n != 1 {
		t.Errorf("%d reminders sent, want 1", n)
	}
	if c := l.claim(t, e); c.Status != delivery.StatusCompleted {
		t.Errorf("claim %q, want completed", c.Status)
	}
}

// unknownThenDecided checks what follows a first delivery that left the
// reminder's outcome unknown: the redelivery does not send it, dead-letters
// the subscription naming the effect (ERROR, EffectUnknown), and, once an
// operator decides, the replay sends it (redo) or completes without (done).
func (l *lane) unknownThenDecided(t *testing.T, e envelope.Envelope, decision effect.Status, sentBefore int) {
	t.Helper()
	res, err := l.deliver(t, e, 10*time.Second)
	if err != nil || res.Subscriptions[0].Outcome != delivery.DeadLettered || !errors.Is(res.Subscriptions[0].Err, effect.ErrUnknown) {
		t.Fatalf("redelivery: %+v %v; want dead-lettered with the effect unknown", res, err)
	}
	if n := l.sent(e); n != sentBefore {
		t.Fatalf("%d reminders after the redelivery, want %d (at most once)", n, sentBefore)
	}
	dls, _, err := l.claims.DeadLetters(context.Background(), e.TenantID, "", 10)
	if err != nil || len(dls) != 1 || dls[0].Effect != effectKey(e).String() {
		t.Fatalf("dead letters %+v (%v), want one naming the effect %s", dls, err, effectKey(e))
	}
	if !strings.Contains(l.metrics.String(), `"`+keys.MetricEffectUnknown+`"`) || !strings.Contains(l.logs.String(), `"level":"ERROR"`) {
		t.Errorf("no %s metric or ERROR line", keys.MetricEffectUnknown)
	}
	// Replayed before a decision: still parked.
	if sr, err := l.d.Replay(context.Background(), e, reminders.Subscription); err != nil || sr.Outcome != delivery.DeadLettered {
		t.Fatalf("replay before a decision: %+v %v, want dead-lettered again", sr, err)
	}
	if _, err := l.effects.Decide(context.Background(), effectKey(e), decision, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if sr, err := l.d.Replay(context.Background(), e, reminders.Subscription); err != nil || sr.Outcome != delivery.Completed {
		t.Fatalf("replay after %s: %+v %v, want completed", decision, sr, err)
	}
	want := sentBefore
	if decision == effect.StatusRedo {
		want++
	}
	if n := l.sent(e); n != want {
		t.Errorf("after %s: %d reminders, want %d", decision, n, want)
	}
	if c := l.claim(t, e); c.Status != delivery.StatusCompleted {
		t.Errorf("claim %q, want completed", c.Status)
	}
	if n, err := l.claims.CountDeadLetters(context.Background(), e.TenantID); err != nil || n != 0 {
		t.Errorf("%d dead letters left (%v), want 0", n, err)
	}
}

// TestReminderStartAnswerAfterDeadline: the record commits and its answer
// comes after the invocation's deadline. Nobody knows whether the reminder
// went out (here it did not): unknown, then redone.
func TestReminderStartAnswerAfterDeadline(t *testing.T) {
	l := newLane(t)
	e := opened(t)
	localaws.InjectFault(t, l.db, localaws.Fault{Action: "UpdateItem", Table: l.table, Match: `"` + keys.StateEffectPrefix, Kind: "delay", DelayMs: 1500})
	if res, err := l.deliver(t, e, 500*time.Millisecond); err == nil && !res.RetryLater() {
		t.Fatalf("the delivery past its deadline completed: %+v", res)
	}
	time.Sleep(1500 * time.Millisecond)
	l.unknownThenDecided(t, e, effect.StatusRedo, 0)
}

// TestReminderKillBetweenRecordAndSend: the process died after recording
// the reminder and before sending it (the record a SIGKILL leaves: started
// under the dead delivery's token). Unknown; the operator finds it was not
// sent and decides redo: one reminder.
func TestReminderKillBetweenRecordAndSend(t *testing.T) {
	l := newLane(t)
	e := opened(t)
	l.leftByKill(t, e)
	l.unknownThenDecided(t, e, effect.StatusRedo, 0)
}

// TestReminderKillAfterSend: the process died after the reminder went out
// and before it was recorded. Unknown; the operator finds it was sent (the
// line) and decides done: still one reminder.
func TestReminderKillAfterSend(t *testing.T) {
	l := newLane(t)
	e := opened(t)
	l.leftByKill(t, e)
	_, _ = l.logs.Write([]byte(`{"level":"INFO","msg":"` + reminders.Sent + `","event_id":"` + e.ID + `"}` + "\n")) // the line it printed before it died
	l.unknownThenDecided(t, e, effect.StatusDone, 1)
}

// leftByKill leaves what a delivery killed inside the reminder's effect
// leaves: its claim pending under an expired lease, and the effect started
// under its token.
func (l *lane) leftByKill(t *testing.T, e envelope.Envelope) {
	t.Helper()
	ctx := context.Background()
	past := time.Now().Add(-time.Minute)
	if c, err := l.claims.Claim(ctx, delivery.ClaimRequest{Key: delivery.Key{EventID: e.ID, Subscription: reminders.Subscription}, Tenant: e.TenantID,
		Type: e.Type, Seq: e.Seq, SchemaVersion: e.SchemaVersion, Token: "killed", Now: past, LeaseUntil: past.Add(time.Second), ExpiresAt: time.Now().Add(time.Hour)}); err != nil || !c.Acquired {
		t.Fatal(c, err)
	}
	if _, ok, err := l.effects.Start(ctx, effect.Record{Key: effectKey(e), Tenant: e.TenantID, Seq: e.Seq, Status: effect.StatusStarted, Token: "killed",
		UpdatedAt: past, ExpiresAt: time.Now().Add(time.Hour)}, false); err != nil || !ok {
		t.Fatal(ok, err)
	}
}
