// Command dlq-repair is the relay's next release of its dlq-repair function.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay/next"
)

func main() { serve.DLQRepair(next.App) }
