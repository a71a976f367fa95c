// Command dlq-repair is the library's dlq-repair function (serve.DLQRepair).
package main

import (
	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() { serve.DLQRepair(library.App) }
