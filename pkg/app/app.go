// Package app describes an application built on fourlanes as one Go value:
// its modules' declarations, how each module binds its handlers inside a
// function given the runtime's clients, and what environment those handlers
// read. The functions' entry points (pkg/serve) and the CDK construct
// (infra/backbone) both take it, so what is deployed and what runs are built
// from the same value and cannot drift.
//
// A module whose subscriptions run on a lane is bound in every function that
// runs the lane: DURABLE in durable-consumer and dlq-repair, BEST_EFFORT in
// changefeed and dlq-repair. Tracked entities (tables whose changes become
// record.written/deleted.<ENTITY>) are declared by the modules themselves
// (catalog.Module.Tracks); the construct is given their tables.
//
// Every application also carries the framework's own module after its own
// (pkg/heartbeat: the stack's heartbeat and its DURABLE subscriber):
// Catalog, Runs and RunsDurable include it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/fourlanes/fourlanes/pkg/internal/ident"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Application is one application of fourlanes.
type Application struct {
	// Name names the application (lower-case letters, digits and hyphens,
	// starting with a letter, at most 32): log lines, alarm descriptions and
	// the construct's defaults use it.
	Name string
	// Modules lists every module of the application.
	Modules []Module
	// ChainShards names the application's hot tenants and how many chains
	// each one's log is split into (2 to tenancy.MaxShards; DESIGN-NOTES.md, "Hot tenants").
	// Every emitter of the application must use the same value: give it to
	// eventstore.Config.Shards in your services, as fourlanes emit does, and
	// never shrink a tenant's number. Tenants not listed keep one chain.
	ChainShards map[string]int
}

// Module is one module: its declaration and, for a module with
// subscriptions, how to bind their handlers.
type Module struct {
	// Spec is the declaration (catalog.Module[T].Spec()).
	Spec catalog.Spec
	// Bind binds the module's handlers in a function that runs one of its
	// subscriptions' lanes. Required when Spec has a DURABLE or BEST_EFFORT
	// subscription; INLINE and LOCAL ones run in the emitting service, which
	// binds them itself (lanes.InProcess).
	Bind func(rt Runtime) (Bound, error)
	// Env names the environment variables Bind reads from Runtime.Env (the
	// module's own tables, say). The construct sets each on every function
	// that binds the module, and the runtime refuses to start without them.
	Env []string
	// AlarmTopicArn names who is paged for this module's failures: an SNS
	// topic (a team's on-call). The backbone alarms there, beside the
	// stack's own alarm topic, on the module's DURABLE dead letters, its
	// LOCAL handlers' failures and its event types that matched no
	// subscription. Empty: only the stack's topic hears of them.
	AlarmTopicArn string
}

// Runtime is what a function gives a module's Bind.
type Runtime struct {
	// Function is the function binding the module (keys.Fn*).
	Function string
	// DynamoDB is the function's DynamoDB client.
	DynamoDB *dynamodb.Client
	// StateTable is the backbone's state table, where handlers may keep
	// their own idempotency records (keys under their module's prefix).
	StateTable string
	// Env holds the values of the module's Env.
	Env     map[string]string
	Logger  *slog.Logger
	Metrics *obs.Metrics
}

// Bound is a module bound in one function.
type Bound struct {
	Binding catalog.Binding
	// Reapplier, when set, lets dlq-repair re-apply an entity's current state
	// to a BEST_EFFORT projection whose change events were lost.
	Reapplier Reapplier
}

// Reapplier re-applies one entity's state at a version (repair.Reapplier).
type Reapplier interface {
	Repair(ctx context.Context, tenant, entity, id string, version int64, item map[string]any) error
}

// validName is an application name's form: ^[a-z][a-z0-9-]{0,31}$.
func validName(name string) bool { return ident.Word(name, 32, ident.Lower, ident.LowerDigitHyphen) }

// Catalog returns the application's catalog, built from every module's
// declaration.
func (a Application) Catalog() (*catalog.Catalog, error) {
	mods := a.modules()
	specs := make([]catalog.Spec, len(mods))
	for i, m := range mods {
		specs[i] = m.Spec
	}
	return catalog.New(specs...)
}

// Validate checks the application: its name, its catalog, and that every
// module with subscriptions can be bound.
func (a Application) Validate() error {
	_, err := a.Check()
	return err
}

// Check is Validate that also returns the catalog it built, so a process
// that needs both (a function at cold start) builds it once.
func (a Application) Check() (*catalog.Catalog, error) {
	var errs []error
	if !validName(a.Name) {
		errs = append(errs, fmt.Errorf("app: Name %q: want 1 to 32 lower-case letters, digits and hyphens, starting with a letter", a.Name))
	}
	cat, err := a.Catalog()
	if err != nil {
		errs = append(errs, fmt.Errorf("app %s: %w", a.Name, err))
	}
	for _, t := range slices.Sorted(maps.Keys(a.ChainShards)) {
		if err := tenancy.CheckShards(t, a.ChainShards[t]); err != nil {
			errs = append(errs, fmt.Errorf("app %s: ChainShards: %w", a.Name, err))
		}
	}
	for _, m := range a.Runs(catalog.Durable, catalog.BestEffort) {
		if m.Bind == nil {
			errs = append(errs, fmt.Errorf("app %s: module %s has DURABLE or BEST_EFFORT subscriptions and no Bind: give Module.Bind", a.Name, m.Spec.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cat, nil
}

// Runs returns the modules with a subscription on any of lanes, in order.
func (a Application) Runs(lanes ...catalog.Lane) []Module {
	var out []Module
	for _, m := range a.modules() {
		if slices.ContainsFunc(m.Spec.Subscribes, func(s catalog.SubscriptionSpec) bool { return slices.Contains(lanes, s.Lane) }) {
			out = append(out, m)
		}
	}
	return out
}

// RunsDurable returns the modules the DURABLE lane's functions
// (durable-consumer, dlq-repair) bind, in order: every module with a
// DURABLE subscription, and every module with an INLINE or LOCAL
// subscription that gives a Bind. DURABLE handlers emit follow-on events
// there (eventstore.EmitterFrom), and the INLINE and LOCAL subscribers of
// those events run in the process that emitted them, as in any service.
func (a Application) RunsDurable() []Module {
	var out []Module
	for _, m := range a.modules() {
		in := func(lanes ...catalog.Lane) bool {
			return slices.ContainsFunc(m.Spec.Subscribes, func(s catalog.SubscriptionSpec) bool { return slices.Contains(lanes, s.Lane) })
		}
		if in(catalog.Durable) || (m.Bind != nil && in(catalog.Inline, catalog.Local)) {
			out = append(out, m)
		}
	}
	return out
}

// EmitsFollowOn reports whether a DURABLE handler of the application may
// emit: some module with a DURABLE subscription declares event types. The
// construct then lets the DURABLE lane's functions append to the log, only
// inside TransactWriteItems, as Emit does.
// The framework's own module (the heartbeat) emits nothing from its handler.
func (a Application) EmitsFollowOn() bool {
	return slices.ContainsFunc(a.Runs(catalog.Durable), func(m Module) bool { return m.Spec.Name != builtin.Spec.Name && len(m.Spec.Emits) > 0 })
}

// Env returns the environment variables the modules running on lanes read,
// each once, in order.
func (a Application) Env(lanes ...catalog.Lane) []string {
	return EnvOf(a.Runs(lanes...))
}

// EnvOf returns the environment variables mods read, each once, in order.
func EnvOf(mods []Module) []string {
	var out []string
	for _, m := range mods {
		for _, e := range m.Env {
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
	}
	return out
}
