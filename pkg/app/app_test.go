package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

type recv struct{}

func (recv) On(context.Context, envelope.Envelope) error { return nil }

var (
	durable = catalog.Module[recv]{Name: "mail", Subscribes: []catalog.Subscription[recv]{
		{Name: "mail.all", Types: "shop.*", Lane: catalog.Durable, Reads: []int{1}, Handler: recv.On},
	}}
	inline = catalog.Module[recv]{Name: "stock", Subscribes: []catalog.Subscription[recv]{
		{Name: "stock.all", Types: "shop.*", Lane: catalog.Inline, Reads: []int{1}, Handler: recv.On},
	}}
	shop = catalog.Module[catalog.NoHandlers]{Name: "shop", Emits: []catalog.EventType{{Name: "shop.sold", Versions: []catalog.Version{catalog.V[struct{ N int }](1)}}}}
)

func bindMail(app.Runtime) (app.Bound, error) { return app.Bound{Binding: durable.Bind(recv{})}, nil }

func TestValidate(t *testing.T) {
	good := app.Application{Name: "shop-1", Modules: []app.Module{
		{Spec: shop.Spec()},
		{Spec: durable.Spec(), Bind: bindMail, Env: []string{"MAIL_TABLE"}},
		{Spec: inline.Spec()}, // INLINE: bound by the emitting service
	}}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid application: %v", err)
	}
	if cat, err := good.Check(); err != nil || cat == nil || !cat.Known("shop.sold") {
		t.Fatalf("Check: catalog %v, %v; want the application's (shop.sold known)", cat, err)
	}
	// The framework's module (the heartbeat's subscriber) runs after the
	// application's own.
	if got := good.Runs(catalog.Durable, catalog.BestEffort); len(got) != 2 || got[0].Spec.Name != "mail" || got[1].Spec.Name != keys.HeartbeatModule {
		t.Errorf("Runs(DURABLE, BEST_EFFORT): got %d modules, want mail and %s", len(got), keys.HeartbeatModule)
	}
	if cat, _ := good.Check(); !cat.Known(keys.HeartbeatType) {
		t.Errorf("Check: catalog does not know %s, want every application's catalog to declare it", keys.HeartbeatType)
	}
	// A team's module cannot take the framework's name.
	clash := good
	clash.Modules = append(slices.Clone(good.Modules), app.Module{Spec: catalog.Module[catalog.NoHandlers]{Name: keys.HeartbeatModule}.Spec()})
	if err := clash.Validate(); err == nil {
		t.Errorf("Validate: a module named %s accepted, want it refused", keys.HeartbeatModule)
	}
	if got := good.Env(catalog.Durable); !slices.Equal(got, []string{"MAIL_TABLE"}) {
		t.Errorf("Env(DURABLE): got %v", got)
	}
	if got := good.Env(catalog.BestEffort); len(got) != 0 {
		t.Errorf("Env(BEST_EFFORT): got %v, want none", got)
	}

	sharded := good
	sharded.ChainShards = map[string]int{"hot": 32, "warm": 2}
	if err := sharded.Validate(); err != nil {
		t.Errorf("an application with chain shards: %v", err)
	}

	for _, tc := range []struct {
		name string
		app  app.Application
		want string
	}{
		{"bad name", app.Application{Name: "Shop", Modules: good.Modules}, `Name "Shop"`},
		{"no bind", app.Application{Name: "shop", Modules: []app.Module{{Spec: shop.Spec()}, {Spec: durable.Spec()}}}, "module mail has DURABLE or BEST_EFFORT subscriptions and no Bind"},
		{"bad catalog", app.Application{Name: "shop", Modules: []app.Module{{Spec: durable.Spec(), Bind: bindMail}}}, "app shop:"},
		{"one shard", app.Application{Name: "shop", Modules: good.Modules, ChainShards: map[string]int{"hot": 1}}, `app shop: ChainShards: tenant "hot": 1 chain shards: use 2 to 32`},
		{"reserved tenant", app.Application{Name: "shop", Modules: good.Modules, ChainShards: map[string]int{"hot~2": 4}}, "ChainShards: tenant id \"hot~2\": ends in"},
	} {
		err := tc.app.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
		if cat, err := tc.app.Check(); err == nil || cat != nil {
			t.Errorf("%s: Check gave catalog %v, %v; want none and the error", tc.name, cat, err)
		}
	}
}

// projection is a receiver that is also a Reapplier.
type projection struct{ recv }

func (projection) Repair(context.Context, string, string, string, int64, map[string]any) error {
	return nil
}

var projected = catalog.Module[projection]{Name: "view", Subscribes: []catalog.Subscription[projection]{
	{Name: "view.all", Types: "shop.*", Lane: catalog.Durable, Reads: []int{1}, Handler: projection.On},
}}

// TestBindAndDeclare: one call per module. Bind builds the receiver in the
// function (given the runtime, its env names set on the functions that run
// it), offers a receiver that is a Reapplier to dlq-repair, and names the
// module when the build fails; Declare is a module that binds nothing.
func TestBindAndDeclare(t *testing.T) {
	var got app.Runtime
	a := app.Application{Name: "shop", Modules: []app.Module{
		app.Declare(shop),
		app.Bind(durable, func(rt app.Runtime) (recv, error) { got = rt; return recv{}, nil }, "MAIL_TABLE"),
		app.Bind(projected, func(app.Runtime) (projection, error) { return projection{}, nil }),
	}}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if env := a.Env(catalog.Durable); !slices.Equal(env, []string{"MAIL_TABLE"}) {
		t.Errorf("Env: %v, want MAIL_TABLE", env)
	}
	if a.Modules[0].Bind != nil {
		t.Error("Declare gave a module a Bind")
	}
	b, err := a.Modules[1].Bind(app.Runtime{Function: "durable-consumer", Env: map[string]string{"MAIL_TABLE": "t"}})
	if err != nil || b.Reapplier != nil || got.Env["MAIL_TABLE"] != "t" || got.Function != "durable-consumer" {
		t.Errorf("mail bound: %+v, %v (runtime %+v); want no Reapplier and the runtime given", b, err, got)
	}
	if b, err := a.Modules[2].Bind(app.Runtime{}); err != nil || b.Reapplier == nil {
		t.Errorf("a projection bound: %+v, %v; want its Reapplier", b, err)
	}
	bad := app.Bind(durable, func(app.Runtime) (recv, error) { return recv{}, errors.New("no mail relay configured") })
	if _, err := bad.Bind(app.Runtime{}); err == nil || !strings.Contains(err.Error(), "module mail: no mail relay configured") {
		t.Errorf("a failed build: %v, want it named by module", err)
	}
}

// TestEventStore: the store takes the application's catalog and chain
// shards, so an emitter cannot disagree with another; an invalid
// application opens none.
func TestEventStore(t *testing.T) {
	a := app.Application{Name: "shop", Modules: []app.Module{app.Declare(shop)}, ChainShards: map[string]int{"hot": 4}}
	s, err := a.EventStore(nil, "events")
	if err != nil || s == nil {
		t.Fatalf("EventStore: %v", err)
	}
	if _, err := s.Emit(tenancyCtx(t, "hot"), "shop.sold", map[string]any{"N": 1}); !errors.Is(err, eventstore.ErrNoShardKey) {
		t.Errorf("an emit for the sharded tenant without a shard key: %v, want ErrNoShardKey (the shards came from the application)", err)
	}
	if _, err := s.Emit(tenancyCtx(t, "cold"), "shop.unknown", map[string]any{}); err == nil || !strings.Contains(err.Error(), "shop.unknown") {
		t.Errorf("an undeclared type: %v, want it refused by the application's catalog", err)
	}
	if _, err := (app.Application{Name: "Bad"}).EventStore(nil, "events"); err == nil {
		t.Error("an invalid application opened a store")
	}
}

func tenancyCtx(t *testing.T, tenant string) context.Context {
	t.Helper()
	ctx, err := tenancy.WithTenant(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return ctx
}

// TestRunsDurable: the DURABLE lane's functions bind the DURABLE modules and
// the INLINE/LOCAL ones that give a Bind (they run on follow-on events
// emitted there); EmitsFollowOn only when a DURABLE module declares types.
func TestRunsDurable(t *testing.T) {
	bindStock := func(app.Runtime) (app.Bound, error) { return app.Bound{Binding: inline.Bind(recv{})}, nil }
	names := func(ms []app.Module) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Spec.Name)
		}
		return out
	}
	a := app.Application{Name: "shop-1", Modules: []app.Module{
		{Spec: shop.Spec()},
		{Spec: durable.Spec(), Bind: bindMail, Env: []string{"MAIL_TABLE"}},
		{Spec: inline.Spec()}, // no Bind: bound only by the service that emits
	}}
	if got := names(a.RunsDurable()); !slices.Equal(got, []string{"mail", keys.HeartbeatModule}) {
		t.Errorf("RunsDurable without a bound INLINE module: %v, want [mail %s]", got, keys.HeartbeatModule)
	}
	// The heartbeat's module declares a type but its handler emits nothing:
	// it must not give the DURABLE lane the right to append.
	if a.EmitsFollowOn() {
		t.Error("EmitsFollowOn: mail declares no type, want false")
	}
	a.Modules[2] = app.Module{Spec: inline.Spec(), Bind: bindStock, Env: []string{"STOCK_TABLE"}}
	if got := names(a.RunsDurable()); !slices.Equal(got, []string{"mail", "stock", keys.HeartbeatModule}) {
		t.Errorf("RunsDurable: %v, want [mail stock %s]", got, keys.HeartbeatModule)
	}
	if got := app.EnvOf(a.RunsDurable()); !slices.Equal(got, []string{"MAIL_TABLE", "STOCK_TABLE"}) {
		t.Errorf("EnvOf(RunsDurable): %v", got)
	}
	emitting := durable
	emitting.Emits = []catalog.EventType{{Name: "mail.sent", Versions: []catalog.Version{catalog.V[struct{ N int }](1)}}}
	a.Modules[1].Spec = emitting.Spec()
	if !a.EmitsFollowOn() {
		t.Error("EmitsFollowOn: mail declares mail.sent, want true")
	}
}

// TestBindNil: Bind(m, nil) is Declare(m) for a module that only emits, and
// for a module with a DURABLE subscription it leaves the Bind out, which
// Validate refuses by name.
func TestBindNil(t *testing.T) {
	if m := app.Bind(shop, nil); m.Bind != nil || m.Spec.Name != "shop" {
		t.Errorf("Bind(shop, nil): %+v, want the declaration without a Bind", m)
	}
	a := app.Application{Name: "shop", Modules: []app.Module{app.Bind(shop, nil), app.Bind(durable, nil)}}
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "module mail has DURABLE or BEST_EFFORT subscriptions and no Bind") {
		t.Errorf("Validate with Bind(durable, nil): %v, want module mail refused for its missing Bind", err)
	}
}

// TestHandlerHelpers: the helpers a module's code uses from app are the
// framework's: Permanent marks an error permanent for the lanes, Tenant
// reads the context's tenant, ConditionFailed sees a failed condition of
// the caller's own write (wrapped) and nothing else.
func TestHandlerHelpers(t *testing.T) {
	if err := app.Permanent(errors.New("bad payload")); !delivery.IsPermanent(err) {
		t.Errorf("Permanent: %v is not permanent to the lanes", err)
	}
	if _, err := app.Tenant(context.Background()); !errors.Is(err, tenancy.ErrNoTenant) {
		t.Errorf("Tenant of a bare context: %v, want ErrNoTenant", err)
	}
	if got, err := app.Tenant(tenancy.MustWithTenant(context.Background(), "acme")); got != "acme" || err != nil {
		t.Errorf("Tenant: %q, %v; want acme", got, err)
	}
	cond := fmt.Errorf("return loan: %w", &eventstore.CallerWriteError{Code: "ConditionalCheckFailed"})
	other := fmt.Errorf("return loan: %w", &eventstore.CallerWriteError{Code: "ValidationError"})
	if !app.ConditionFailed(cond) || app.ConditionFailed(other) || app.ConditionFailed(errors.New("ConditionalCheckFailed")) || app.ConditionFailed(nil) {
		t.Errorf("ConditionFailed: %v %v: want true for the wrapped failed condition only", app.ConditionFailed(cond), app.ConditionFailed(other))
	}
}
