// Command durable-consumer is the library's durable-consumer function (serve.DurableConsumer).
package main

import (
	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() { serve.DurableConsumer(library.App) }
