// Command changefeed is the relay's changefeed function.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay"
)

func main() { serve.Changefeed(relay.App) }
