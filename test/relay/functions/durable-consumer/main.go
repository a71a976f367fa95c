// Command durable-consumer is the relay's durable-consumer function.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay"
)

func main() { serve.DurableConsumer(relay.App) }
