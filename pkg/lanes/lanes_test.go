package lanes_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

func TestMain(m *testing.M) { localaws.Main(m) }

var _ eventstore.Dispatcher = (*lanes.InProcess)(nil)

type cartV1 struct {
	CartID string `json:"cart_id"`
}

var errGuard = errors.New("fraud check refused the cart")

// shop's handlers record what ran; guard fails, crash panics.
type shop struct {
	mu      sync.Mutex
	ran     []string
	tenants []string
	hold    chan struct{}
}

func (s *shop) note(name string, ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ran = append(s.ran, name)
	tn, _ := tenancy.Tenant(ctx)
	s.tenants = append(s.tenants, tn)
}

func (s *shop) ranNames() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.ran, " ")
}

func (s *shop) guard(ctx context.Context, e envelope.Envelope) error {
	s.note("shop.guard", ctx)
	return errGuard
}

func (s *shop) crash(ctx context.Context, e envelope.Envelope) error {
	s.note("shop.crash", ctx)
	var m map[string]int
	m["boom"]++ // a nil-map write: a real panic
	return nil
}

func (s *shop) count(ctx context.Context, e envelope.Envelope) error {
	if s.hold != nil {
		<-s.hold
	}
	s.note("shop.count", ctx)
	return nil
}

func (s *shop) project(ctx context.Context, e envelope.Envelope) error {
	s.note("shop.project", ctx)
	if e.Payload["id"] == "bad" {
		return errors.New("projection store down")
	}
	return nil
}

var shopModule = catalog.Module[*shop]{
	Name: "shop",
	Emits: []catalog.EventType{
		{Name: "cart.checked-out", Versions: []catalog.Version{catalog.V[cartV1](1)}},
		{Name: "cart.abandoned", Versions: []catalog.Version{catalog.V[cartV1](1)}, Discriminator: "cart_id"},
		{Name: "cart.viewed", Versions: []catalog.Version{catalog.V[cartV1](1)}},
	},
	Tracks: []catalog.Entity{{Name: "CART", TableEnv: "CARTS_TABLE", TenantAttr: "tenant_id", IDAttr: "cart_id", VersionAttr: "version"}},
	Subscribes: []catalog.Subscription[*shop]{
		{Name: "shop.guard", Types: "cart.checked-out", Lane: catalog.Inline, Reads: []int{1}, Handler: (*shop).guard},
		{Name: "shop.crash", Types: "cart.checked-out", Lane: catalog.Local, Reads: []int{1}, Handler: (*shop).crash},
		{Name: "shop.count", Types: "cart.*", Lane: catalog.Local, Reads: []int{1}, Handler: (*shop).count},
		{Name: "shop.durable", Types: "cart.viewed", Lane: catalog.Durable, Reads: []int{1}, Handler: (*shop).count},
		{Name: "shop.project", Types: "record.*.CART", Lane: catalog.BestEffort, Reads: []int{1}, Handler: (*shop).project},
	},
}

type rig struct {
	s       *shop
	reg     *catalog.Registry
	d       *lanes.InProcess
	logs    *obstest.Buffer
	metrics *obstest.Buffer
	cfg     lanes.Config
}

func newRig(t *testing.T) *rig {
	t.Helper()
	cat, err := catalog.New(shopModule.Spec())
	if err != nil {
		t.Fatal(err)
	}
	s := &shop{}
	reg, err := catalog.NewRegistry(cat, shopModule.Bind(s))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{s: s, reg: reg, logs: &obstest.Buffer{}, metrics: &obstest.Buffer{}}
	r.cfg = lanes.Config{Logger: obs.NewLogger(r.logs, "debug"), Metrics: obs.NewMetrics(r.metrics)}
	r.d = lanes.NewInProcess(reg, r.cfg)
	return r
}

// store returns an event store on a fresh events table in the local DynamoDB,
// dispatching through r.d.
func (r *rig) store(t *testing.T) *eventstore.Store {
	t.Helper()
	db := localaws.DynamoDB(t)
	desc := localaws.CreateTable(t, db, &dynamodb.CreateTableInput{
		TableName: aws.String(localaws.UniqueName(t, "events")),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(keys.AttrTenant), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(keys.AttrSeq), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(keys.AttrTenant), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(keys.AttrSeq), KeyType: types.KeyTypeRange},
		},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	st, err := eventstore.New(db, eventstore.Config{Table: aws.ToString(desc.TableName), Catalog: r.reg.Catalog(), Dispatcher: r.d})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestInlineErrorAndLocalPanicThroughEmit runs the real Emit against the
// local DynamoDB: the INLINE error reaches the caller after the commit; the
// LOCAL panic does not, and is logged and counted.
func TestInlineErrorAndLocalPanicThroughEmit(t *testing.T) {
	r := newRig(t)
	st := r.store(t)
	ctx := tenancy.MustWithTenant(context.Background(), "t1")

	env, err := st.Emit(ctx, "cart.checked-out", cartV1{CartID: "c1"})
	var pc *eventstore.PostCommitError
	if !errors.As(err, &pc) {
		t.Fatalf("Emit: got %v, want a *PostCommitError (committed, then INLINE failed)", err)
	}
	var ie *lanes.InlineError
	if !errors.As(err, &ie) || ie.Subscription != "shop.guard" || !errors.Is(err, errGuard) {
		t.Errorf("Emit error: got %v, want an *InlineError of shop.guard wrapping the handler's error", err)
	}
	if pc.Seq != 1 || env.Seq != 1 {
		t.Errorf("committed seq: error says %d, envelope %d; want 1", pc.Seq, env.Seq)
	}
	events, err := st.AllEvents(context.Background(), "t1")
	if err != nil || len(events) != 1 || events[0].ID != env.ID {
		t.Fatalf("log after an INLINE failure: got %d events, %v; want the committed one", len(events), err)
	}

	if err := r.d.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := r.s.ranNames(); !strings.Contains(got, "shop.crash") || !strings.Contains(got, "shop.count") || !strings.Contains(got, "shop.guard") {
		t.Errorf("ran: %s; want guard, crash and count", got)
	}
	logs := r.logs.String()
	if !strings.Contains(logs, "LOCAL subscription failed") || !strings.Contains(logs, "panicked") || !strings.Contains(logs, `"subscription":"shop.crash"`) {
		t.Errorf("LOCAL panic not logged:\n%s", logs)
	}
	if !strings.Contains(r.metrics.String(), keys.MetricLocalFailures) {
		t.Errorf("no %s metric:\n%s", keys.MetricLocalFailures, r.metrics.String())
	}
	for _, tn := range r.s.tenants {
		if tn != "t1" {
			t.Errorf("a handler ran with tenant %q, want t1", tn)
		}
	}

	// An event with only LOCAL subscribers: nothing reaches the caller.
	if _, err := st.Emit(ctx, "cart.abandoned", cartV1{CartID: "c2"}); err != nil {
		t.Errorf("Emit with a LOCAL subscriber only: got %v, want nil", err)
	}
	if err := r.d.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestEmitRefusesWhatTheCatalogRefuses(t *testing.T) {
	r := newRig(t)
	st := r.store(t)
	ctx := tenancy.MustWithTenant(context.Background(), "t1")
	if _, err := st.Emit(ctx, "cart.exploded", cartV1{CartID: "c"}); !errors.Is(err, catalog.ErrUndeclared) {
		t.Errorf("undeclared type: got %v, want ErrUndeclared", err)
	}
	_, err := st.Emit(ctx, "cart.checked-out", map[string]any{"cart": "c"})
	var fe *envelope.FieldError
	if !errors.As(err, &fe) || fe.Field != "payload.cart" {
		t.Errorf("payload with a wrong field: got %v, want a FieldError on payload.cart", err)
	}
	if events, _ := st.AllEvents(context.Background(), "t1"); len(events) != 0 {
		t.Errorf("refused emits wrote %d events", len(events))
	}
}

func TestFlushWaitsForLocalHandlers(t *testing.T) {
	r := newRig(t)
	r.s.hold = make(chan struct{})
	e := envelope.Envelope{ID: "e1", Type: "cart.abandoned", TenantID: "t1", SchemaVersion: 1, Payload: map[string]any{"cart_id": "c"}}
	if err := r.d.AfterCommit(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.d.Flush(ctx); err == nil || !strings.Contains(err.Error(), "1 handlers still running") {
		t.Errorf("Flush with a handler running: got %v, want a deadline error counting 1", err)
	}
	close(r.s.hold)
	if err := r.d.Flush(context.Background()); err != nil {
		t.Errorf("Flush after release: %v", err)
	}
	if got := r.s.ranNames(); got != "shop.count" {
		t.Errorf("ran %q, want shop.count", got)
	}
}

func TestUnmatchedEventWarnsAndCounts(t *testing.T) {
	r := newRig(t)
	e := envelope.Envelope{ID: "e9", Type: "basket.forgotten", TenantID: "t1", SchemaVersion: 1, Payload: map[string]any{"cart_id": "c9"}}
	if err := r.d.AfterCommit(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	logs := r.logs.String()
	if !strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, `"msg":"event matched no subscription"`) || !strings.Contains(logs, `"event_type":"basket.forgotten"`) {
		t.Errorf("no warning naming the type:\n%s", logs)
	}
	if !strings.Contains(r.metrics.String(), `"`+keys.MetricUnmatched+`"`) {
		t.Errorf("no %s metric:\n%s", keys.MetricUnmatched, r.metrics.String())
	}

	// Served by another lane (DURABLE): not unmatched here.
	r2 := newRig(t)
	viewed := envelope.Envelope{ID: "e10", Type: "cart.viewed", TenantID: "t1", SchemaVersion: 1, Payload: map[string]any{"cart_id": "c"}}
	_ = r2.d.AfterCommit(context.Background(), viewed)
	_ = r2.d.Flush(context.Background())
	if strings.Contains(r2.metrics.String(), keys.MetricUnmatched) {
		t.Errorf("an event with a DURABLE subscriber counted as unmatched in process:\n%s", r2.logs.String())
	}
}

func TestBestEffortDispatch(t *testing.T) {
	r := newRig(t)
	be := lanes.NewBestEffort(r.reg, r.cfg)
	ctx := context.Background()
	change := func(typ, id string) envelope.Envelope {
		return envelope.Envelope{ID: "c-" + id, Type: typ, TenantID: "t7", SchemaVersion: 1,
			Payload: map[string]any{"entity": "CART", "id": id, "version": "1"}}
	}
	if err := be.Dispatch(ctx, change("record.written.CART", "ok")); err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	if got := r.s.ranNames(); got != "shop.project" {
		t.Errorf("ran %q, want only the BEST_EFFORT subscription", got)
	}
	if r.s.tenants[0] != "t7" {
		t.Errorf("tenant bound: got %q, want t7 (from the envelope)", r.s.tenants[0])
	}
	err := be.Dispatch(ctx, change("record.deleted.CART", "bad"))
	var se *lanes.SubscriptionError
	if !errors.As(err, &se) || se.Subscription != "shop.project" {
		t.Errorf("failing handler: got %v, want a SubscriptionError of shop.project", err)
	}
	if !strings.Contains(r.metrics.String(), keys.MetricBestEffortFailures) {
		t.Error("BEST_EFFORT failure not counted")
	}
	if err := be.Dispatch(ctx, envelope.Envelope{ID: "x", Type: "cart.viewed", TenantID: "t7", SchemaVersion: 1, Payload: map[string]any{}}); !errors.Is(err, lanes.ErrNotChangeEvent) {
		t.Errorf("domain event on BEST_EFFORT: got %v, want ErrNotChangeEvent", err)
	}
	// A change event of an entity nobody tracks or subscribes to.
	if err := be.Dispatch(ctx, change("record.written.PARCEL", "p")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.logs.String(), `"event_type":"record.written.PARCEL"`) || !strings.Contains(r.metrics.String(), keys.MetricUnmatched) {
		t.Errorf("unmatched change event not reported:\n%s", r.logs.String())
	}
}
