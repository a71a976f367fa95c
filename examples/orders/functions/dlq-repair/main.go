// Command dlq-repair drains the example application's dead-letter queues
// (serve.DLQRepair).
package main

import (
	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() { serve.DLQRepair(example.App) }
