// Command durable-consumer is the DURABLE lane of the example application
// (durableconsumer.Run).
package main

import (
	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/serve/durableconsumer"
)

func main() { durableconsumer.Run(example.App) }
