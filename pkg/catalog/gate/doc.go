// Package gate is the catalog gate: a static check, over a repository's Go
// source (go/packages and go/types, not text search), that the module
// declarations match the code.
//
//  1. every Emit of a constant event type is declared, and a package that
//     declares modules emits only its own modules' types (the type passed to
//     Emit must be a constant);
//  2. every declared type has a producer (an Emit of it in non-test code
//     outside main packages: a benchmark is not a producer), or sits on the
//     allowlist with a reason;
//  3. every subscription glob matches a declared type or a change-feed type
//     (record.written.<ENTITY>, record.deleted.<ENTITY>) of a tracked entity;
//  4. every subscription that can receive change events is on BEST_EFFORT,
//     and every BEST_EFFORT subscription receives change events only;
//  5. every declared (type, version) has a JSON Schema (2020-12) generated
//     from its payload's Go type (Report.Schemas) and, when Config.Schemas
//     names the folder of the published ones (<type>/v<N>.json, checked in),
//     it still fits the published one: a field removed, renamed, retyped,
//     made required or made optional, or added as required, is a violation
//     naming the version and the field that tells the author to declare the
//     next version; an added optional field is compatible (the file is then
//     stale: Config.WriteSchemas, `fourlanes gate -write-schemas`, refreshes
//     it, and never rewrites an incompatible one). A published schema whose
//     version is no longer declared is a violation too;
//  6. every DURABLE subscription's Start (read from source: catalog.FromSeq,
//     FromTime with a constant time.Date, FromAll, or none) is the one
//     recorded in <Config.Schemas>/starts.json (StartsFile) and, with
//     `-check-catalog`, in CATALOG.md (Report.StartChanges). A start is
//     recorded on the stack when the subscription first goes live, so a
//     changed Start either does nothing or silently changes the history a
//     subscription is given: the violation names the subscription and tells
//     the author to keep it and run a backfill. Config.WriteSchemas records
//     subscriptions added and forgets those removed, never a changed start.
//
// Declarations are catalog.Module composite literals; their names, globs and
// lanes must be constants. An Emit is any call of a method named Emit whose
// first two parameters are a context.Context and a string (eventstore.Store's,
// or a consumer-side interface of it), or of a method named EmitWith whose
// first two are a context.Context and an eventstore.EmitInput (the form a
// shard key or an idempotency key needs): its input must be written as a
// literal in the call, with a constant Type. Test files are not read: tests
// may emit what they like through fakes.
//
// Every violation names file:line:column and what to do. Report.Markdown
// renders an application's generated catalog (its CATALOG.md), which
// `fourlanes gate -catalog CATALOG.md` writes and `-check-catalog` checks;
// the orders example's drift test is examples/orders/gate_test.go.
package gate
