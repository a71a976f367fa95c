// Command dlq-repair is the library's dlq-repair function (dlqrepair.Run).
package main

import (
	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/serve/dlqrepair"
)

func main() { dlqrepair.Run(library.App) }
