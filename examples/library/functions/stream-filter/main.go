// Command stream-filter is the library's stream-filter function (serve.StreamFilter).
package main

import (
	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() { serve.StreamFilter(library.App) }
