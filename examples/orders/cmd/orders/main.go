// Command orders is the orders example's build of the fourlanes CLI
// (pkg/cli): every command, with the application's catalog for emit and
// watermarks, and dev running its demo workload.
package main

import (
	"os"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/demo"
	"github.com/fourlanes/fourlanes/pkg/cli"
	"github.com/fourlanes/fourlanes/twin/devcli"
)

func main() { os.Exit(cli.Main(&example.App, devcli.Commands(demo.Dev())...)) }
