// Command allinone is the orders example's eight functions in one binary, the
// role chosen by $FOURLANES_FUNCTION (keys.Fn*). The stack deploys one
// binary per role (examples/orders/functions); make bench builds this one
// beside them to measure what one binary for every role would cost in size
// and cold start.
package main

import (
	"fmt"
	"os"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() {
	switch fn := os.Getenv(keys.EnvFunction); fn {
	case keys.FnStreamFilter:
		serve.StreamFilter(example.App)
	case keys.FnDurableConsumer:
		serve.DurableConsumer(example.App)
	case keys.FnChangefeed:
		serve.Changefeed(example.App)
	case keys.FnReconcile:
		serve.Reconcile(example.App)
	case keys.FnDLQRepair:
		serve.DLQRepair(example.App)
	case keys.FnTamperWatch:
		serve.TamperWatch()
	case keys.FnNotary:
		serve.Notary()
	case keys.FnHeartbeat:
		serve.Heartbeat()
	default:
		fmt.Fprintf(os.Stderr, "allinone: %s=%q: want one of %v\n", keys.EnvFunction, fn, keys.Functions)
		os.Exit(1)
	}
}
