package delivery

import (
	"slices"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// TestServes: the framework's subscriptions keep watermarks only on the
// framework's chains and an application's only on its tenants, so neither
// side's reconcile report, watermark writes or repair walks carry the
// other's.
func TestServes(t *testing.T) {
	subs := []string{"notifications.order-email", keys.HeartbeatSubscription, "search.orders"}
	if got, want := ForChain(subs, "acme"), []string{"notifications.order-email", "search.orders"}; !slices.Equal(got, want) {
		t.Errorf("acme: %v, want %v", got, want)
	}
	if got, want := ForChain(subs, tenancy.HeartbeatTenant), []string{keys.HeartbeatSubscription}; !slices.Equal(got, want) {
		t.Errorf("%s: %v, want %v", tenancy.HeartbeatTenant, got, want)
	}
	// A team module whose name merely begins with the framework's is not it.
	if !Serves("fourlanesque.mail", "acme") || Serves("fourlanesque.mail", tenancy.HeartbeatTenant) {
		t.Error("fourlanesque.mail: an application subscription")
	}
}
