package demo

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/fourlanes/fourlanes/twin/devcli"
)

// Dev is the orders example's demo workload for `fourlanes dev`: tenants of
// orders, one dead letter (a payload the subscriber cannot decode), and one
// poison record on the change feed, fixed once it is isolated so
// `fourlanes repair -local` can apply it.
func Dev() *devcli.Demo {
	var tenants, perTenant int
	return &devcli.Demo{
		Flags: func(fs *flag.FlagSet) {
			fs.IntVar(&tenants, "tenants", 3, "tenants in the demo workload")
			fs.IntVar(&perTenant, "orders", 5, "orders per tenant in the demo workload")
		},
		Try: []string{`go run ./examples/orders/cmd/orders emit -local -tenant t9 -type order.paid -payload '{"order_id":"o1","customer_email":"a@t9.example","amount_cents":100,"payment_ref":"p1"}'`},
		Run: func(ctx context.Context, env devcli.DemoEnv) {
			t, err := TablesFromEnv(env.TableEnv)
			if err != nil {
				env.Note("demo: %v", err)
				return
			}
			a, err := New(env.DynamoDB, t, env.Logger)
			if err != nil {
				env.Note("demo: %v", err)
				return
			}
			a.dev(ctx, env, tenants, perTenant)
		},
	}
}

func (a *App) dev(ctx context.Context, env devcli.DemoEnv, nTenants, perTenant int) {
	note := env.Note
	tenants := make([]string, nTenants)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%d", i+1)
	}
	note("demo: %d tenants × %d orders (placed, paid, shipped or cancelled)", nTenants, perTenant)
	half := max(perTenant/2, 1)
	if _, err := a.Workload(ctx, tenants, half); err != nil && ctx.Err() == nil {
		note("demo: workload failed: %v", err)
		return
	}
	poisonTenant := tenants[0]
	poison, err := a.PlantPoison(ctx, poisonTenant)
	if err != nil {
		note("demo: %v", err)
		return
	}
	note("demo: placed order %s of %s with a corrupt search document: the change feed will fail on it every time (a poison record)", poison.ID, poisonTenant)
	if e, err := a.EmitUnchecked(ctx, tenants[len(tenants)-1]); err == nil {
		note("demo: emitted %s seq %d of %s with a payload its schema does not allow: notifications will dead-letter it", e.Type, e.Seq, e.TenantID)
	}
	for i := half; i < perTenant; i++ {
		for _, t := range tenants {
			if _, err := a.Order(ctx, t, i); err != nil {
				if ctx.Err() == nil {
					note("demo: workload failed: %v", err)
				}
				return
			}
		}
	}
	note("demo: %d events appended; waiting for the poison record to reach the on-failure queue", a.Emitted())
	for ctx.Err() == nil {
		if n, err := env.QueueDepth(ctx, env.ChangeFeedDLQ); err == nil && n > 0 {
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	if ctx.Err() != nil {
		return
	}
	if err := a.FixPoison(ctx, poisonTenant, poison.ID); err != nil {
		note("demo: %v", err)
		return
	}
	note("demo: the poison record was isolated by bisect and its metadata is on %s; its neighbours were applied. The cause is now fixed: run `fourlanes repair -local` to apply it, then `fourlanes reconcile -local`", env.ChangeFeedDLQ)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
