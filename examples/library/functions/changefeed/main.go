// Command changefeed is the library's changefeed function (changefeed.Run).
package main

import (
	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/serve/changefeed"
)

func main() { changefeed.Run(library.App) }
