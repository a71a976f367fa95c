// Command reconcile serves the reconcile Function URL and schedules for the
// example application (reconcile.Run).
package main

import (
	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/serve/reconcile"
)

func main() { reconcile.Run(example.App) }
