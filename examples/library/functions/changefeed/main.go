// Command changefeed is the library's changefeed function (serve.Changefeed).
package main

import (
	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() { serve.Changefeed(library.App) }
