package app_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
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
	if got := good.Runs(catalog.Durable, catalog.BestEffort); len(got) != 1 || got[0].Spec.Name != "mail" {
		t.Errorf("Runs(DURABLE, BEST_EFFORT): got %d modules, want mail", len(got))
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
