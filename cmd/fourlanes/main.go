// Command fourlanes is the operator's tool for a fourlanes stack (pkg/cli),
// with dev and dynamodb, which run the local twin. It carries no application:
// emit and watermarks need one, so an application's own build of the CLI
// (examples/orders/cmd/orders) runs those.
package main

import (
	"os"

	"github.com/fourlanes/fourlanes/pkg/cli"
	"github.com/fourlanes/fourlanes/twin/devcli"
)

func main() { os.Exit(cli.Main(nil, devcli.Commands(nil)...)) }
