// Command dlq-repair is dlq-repair of the relay without pager.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay/retired"
)

func main() { serve.DLQRepair(retired.App) }
