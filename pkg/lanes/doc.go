// Package lanes holds the dispatchers of the in-process and change-feed lanes
// and what every dispatcher shares: binding the envelope's tenant to the
// handler's context once per event (HandlerContext), the wrappers around a
// handler (guard.go: Guard composes the schema-version check, retries that
// stop on a Permanent error, and panic recovery), and reporting an event
// that matched nothing.
//
// Each lane has exactly one dispatcher:
//
//	INLINE, LOCAL  InProcess, the eventstore.Dispatcher that Emit calls after the commit
//	DURABLE        delivery.Deliverer, called by the durable consumer
//	BEST_EFFORT    BestEffort, called by the change feed for record.* change events
//
// A Lambda function that emits must call InProcess.Flush before its handler
// returns, so that LOCAL handlers finish inside the invocation (Lambda freezes
// the process between invocations; a goroutine left running may never finish).
package lanes
