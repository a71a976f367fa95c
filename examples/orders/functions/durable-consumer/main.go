// Command durable-consumer is the DURABLE lane of the example application
// (serve.DurableConsumer).
package main

import (
	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() { serve.DurableConsumer(example.App) }
