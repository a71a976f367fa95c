// Command changefeed is the relay's next release of its changefeed function.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay/next"
)

func main() { serve.Changefeed(next.App) }
