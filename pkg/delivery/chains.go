package delivery

import (
	"strings"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Serves reports whether the DURABLE subscription sub keeps watermarks and
// is audited on chain. The framework's own subscriptions (module
// keys.HeartbeatModule) serve only the framework's chains
// (tenancy.Framework), and an application's subscriptions only its
// tenants: every event of the other side is "not routed" to them, so a
// watermark there would only cost writes and show in every reconcile
// report as a subscription the tenant never uses.
func Serves(sub, chain string) bool {
	return strings.HasPrefix(sub, keys.HeartbeatModule+".") == tenancy.Framework(chain)
}

// ForChain returns the subscriptions of subs that serve chain (Serves), in
// their order.
func ForChain(subs []string, chain string) []string {
	out := make([]string, 0, len(subs))
	for _, s := range subs {
		if Serves(s, chain) {
			out = append(out, s)
		}
	}
	return out
}

// subscriptionsOf is the application's DURABLE subscriptions that serve
// chain.
func (d *Deliverer) subscriptionsOf(chain string) []string {
	return ForChain(d.Subscriptions(), chain)
}
