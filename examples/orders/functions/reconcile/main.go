// Command reconcile serves the reconcile Function URL and schedules for the
// example application (serve.Reconcile).
package main

import (
	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() { serve.Reconcile(example.App) }
