// Command dlq-repair drains the example application's dead-letter queues
// (dlqrepair.Run).
package main

import (
	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/serve/dlqrepair"
)

func main() { dlqrepair.Run(example.App) }
