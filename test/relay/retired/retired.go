// Package retired is the relay after pager was removed: its DURABLE
// subscription pager.page is no longer declared. The suite's
// TestRetireOnTheTwin redeploys dlq-repair with this build
// (retired/functions) and watches it retire pager.page's state.
package retired

import (
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/test/relay"
)

// App is the relay without pager.
var App = app.Application{Name: relay.App.Name, Modules: relay.App.Modules[:2]}
