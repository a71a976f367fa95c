package cli

import (
	"context"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// testApp is the application the CLI's tests run with: an orders module that
// emits order.placed and order.paid, and two DURABLE subscriptions on them
// (watermarks lists one line per subscription and tenant).
var testApp = app.Application{
	Name: "clitest",
	Modules: []app.Module{
		{Spec: testOrders.Spec()},
		{Spec: testNotify.Spec(), Bind: func(app.Runtime) (app.Bound, error) {
			return app.Bound{Binding: testNotify.Bind(testHandler{})}, nil
		}},
	},
}

type placedV1 struct {
	OrderID       string     `json:"order_id"`
	CustomerEmail string     `json:"customer_email"`
	Items         []lineItem `json:"items"`
	TotalCents    int64      `json:"total_cents"`
	Currency      string     `json:"currency"`
}

type lineItem struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type paidV1 struct {
	OrderID string `json:"order_id"`
}

var testOrders = catalog.Module[catalog.NoHandlers]{
	Name: "orders",
	Doc:  "Orders (the CLI tests' fixture).",
	Emits: []catalog.EventType{
		{Name: "order.placed", Doc: "An order was placed.", Versions: []catalog.Version{catalog.V[placedV1](1)}},
		{Name: "order.paid", Doc: "An order was paid.", Versions: []catalog.Version{catalog.V[paidV1](1)}},
	},
}

type testHandler struct{}

func (testHandler) on(context.Context, envelope.Envelope) error { return nil }

var testNotify = catalog.Module[testHandler]{
	Name: "notify",
	Doc:  "Notifications (the CLI tests' fixture).",
	Subscribes: []catalog.Subscription[testHandler]{
		{Name: "notify.email", Types: "order.*", Lane: catalog.Durable, Reads: []int{1}, Doc: "An email per order event.", Handler: testHandler.on},
		{Name: "notify.sms", Types: "order.*", Lane: catalog.Durable, Reads: []int{1}, Doc: "A text per order event.", Handler: testHandler.on},
	},
}
