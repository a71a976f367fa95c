// Command durable-consumer is the library's durable-consumer function (durableconsumer.Run).
package main

import (
	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/serve/durableconsumer"
)

func main() { durableconsumer.Run(library.App) }
