// Command library is the library application's build of the fourlanes CLI
// (pkg/cli): every operator command, with the application's catalog for
// emit and watermarks.
package main

import (
	"os"

	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/cli"
)

func main() { os.Exit(cli.Main(&library.App)) }
