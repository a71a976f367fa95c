// Package serve runs any of fourlanes' functions from one binary: each
// entry point here calls the function's own package under pkg/serve
// (streamfilter, durableconsumer, changefeed, reconcile, dlqrepair,
// tamperwatch, notary, heartbeat). A binary that imports serve links every function's AWS
// clients (KMS, S3, SQS, DynamoDB Streams); a Lambda function's main
// imports its own package instead, so it links only what it uses:
//
//	func main() { durableconsumer.Run(example.App) }
//
// Each entry point sets up the JSON logger (obs.Setup), reads and checks its
// environment, builds its AWS clients, binds the application's modules for
// the lanes it runs (app.Module.Bind), and starts the Lambda runtime with its
// metrics flushed and its invocation traced once per invocation. A function
// that cannot start logs why at ERROR, naming what is missing, and exits 1:
// Lambda reports the init failure, and the function's Errors alarm fires.
package serve

import (
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/serve/changefeed"
	"github.com/fourlanes/fourlanes/pkg/serve/dlqrepair"
	"github.com/fourlanes/fourlanes/pkg/serve/durableconsumer"
	"github.com/fourlanes/fourlanes/pkg/serve/heartbeat"
	"github.com/fourlanes/fourlanes/pkg/serve/notary"
	"github.com/fourlanes/fourlanes/pkg/serve/reconcile"
	"github.com/fourlanes/fourlanes/pkg/serve/streamfilter"
	"github.com/fourlanes/fourlanes/pkg/serve/tamperwatch"
)

// StreamFilter runs stream-filter (streamfilter.Run).
func StreamFilter(a app.Application) { streamfilter.Run(a) }

// DurableConsumer runs durable-consumer (durableconsumer.Run).
func DurableConsumer(a app.Application) { durableconsumer.Run(a) }

// Changefeed runs changefeed (changefeed.Run).
func Changefeed(a app.Application) { changefeed.Run(a) }

// Reconcile runs reconcile (reconcile.Run).
func Reconcile(a app.Application) { reconcile.Run(a) }

// DLQRepair runs dlq-repair (dlqrepair.Run).
func DLQRepair(a app.Application) { dlqrepair.Run(a) }

// TamperWatch runs tamper-watch (tamperwatch.Run).
func TamperWatch() { tamperwatch.Run() }

// Notary runs the notary (notary.Run).
func Notary() { notary.Run() }

// Heartbeat runs the heartbeat writer (heartbeat.Run).
func Heartbeat() { heartbeat.Run() }
