// Command durable-consumer is the relay's next release of its durable-consumer function.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay/next"
)

func main() { serve.DurableConsumer(next.App) }
