// Command reconcile is the relay's reconcile function.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay"
)

func main() { serve.Reconcile(relay.App) }
