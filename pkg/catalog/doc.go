// Package catalog holds the module declarations of an application: what each
// module emits (event types, a payload Go type per schema version), which
// entities it tracks (their tables feed the change feed), and what it
// subscribes to (name, type glob, lane, readable schema versions, handler).
//
// A module declares all of this in one Go file, as one Module value written
// as a composite literal with constant names, globs and lanes, so that the
// catalog gate (pkg/catalog/gate) can read it from source. Registration binds
// handlers from the same value (Module.Bind), so declaration and wiring
// cannot drift.
//
// A Catalog is every module of the application; it implements the event
// store's Catalog (Prepare refuses undeclared types and payloads that do not
// fit the declared Go type). A Registry is a Catalog plus the handlers one
// process has bound; dispatchers (pkg/lanes, pkg/delivery) route through it,
// and it reports declared subscriptions that the process forgot to bind.
//
// Schema versions evolve by addition: a version may declare the upcaster
// that builds it from the one before (V[T](n, Upcast(fn))), and a
// subscription's handler may be Typed: it takes one version's payload type,
// and the registry decodes every event once, as a tolerant reader
// (envelope.DecodePayload), upcasting older versions to it, before the
// handler runs. New refuses a typed handler that could not receive a version
// it reads. The catalog gate keeps each published version's shape (its JSON
// Schema, checked in) from changing incompatibly: docs/changing-events.md.
//
// Type globs: '*' matches any run of characters (dots included, as fnmatch
// does), '?' exactly one. A glob without wildcards is an exact type.
package catalog
