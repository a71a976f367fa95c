// Command dlq-repair is the relay's dlq-repair function.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay"
)

func main() { serve.DLQRepair(relay.App) }
