// Command reconcile is the library's reconcile function (serve.Reconcile).
package main

import (
	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() { serve.Reconcile(library.App) }
