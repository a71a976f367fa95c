package notifications

import "github.com/fourlanes/fourlanes/pkg/catalog"

// Owner is who is paged for the order email's dead letters.
const Owner = "team-notifications"

// Module declares notifications' one subscription: an email to the customer
// for every order event. DURABLE, because an email must not be lost when the
// mailer is down; its send is an effect (effect.Do), because the lane
// delivers at least once. Its owner, team-notifications, is paged for its
// dead letters (infra/stack gives the owner its alarm destination).
var Module = catalog.Module[*Notifier]{
	Name: "notifications",
	Doc:  "Customer emails.",
	Subscribes: []catalog.Subscription[*Notifier]{
		{Name: "notifications.order-email", Types: "order.*", Lane: catalog.Durable, Reads: []int{1, 2}, Owner: Owner,
			Doc: "One email per order event, at least once (twice only after a crash between send and record).", Handler: (*Notifier).OnOrderEvent},
	},
}
