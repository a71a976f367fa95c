// Command reconcile is the library's reconcile function (reconcile.Run).
package main

import (
	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/serve/reconcile"
)

func main() { reconcile.Run(library.App) }
