// Command reconcile is the relay's next release of its reconcile function.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay/next"
)

func main() { serve.Reconcile(next.App) }
