package orders

import (
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Event types emitted by orders.
const (
	TypePlaced    = "order.placed"
	TypePaid      = "order.paid"
	TypeShipped   = "order.shipped"
	TypeCancelled = "order.cancelled"
)

// Entity is the tracked entity of the orders table.
const Entity = "ORDER"

// The orders table: EnvTable names it in the functions' environment; its
// partition key is AttrTenant and its sort key AttrID; keys.AttrVersion
// versions each item.
const (
	EnvTable   = "ORDERS_TABLE"
	AttrTenant = "tenant_id"
	AttrID     = "order_id"
)

// Module declares what orders emits and tracks. It subscribes to nothing.
var Module = catalog.Module[catalog.NoHandlers]{
	Name: "orders",
	Doc:  "Order lifecycle. Writes the orders table and announces each change in the same transaction.",
	Emits: []catalog.EventType{
		{Name: TypePlaced, Doc: "A customer placed an order; stock is not yet reserved.",
			Versions: []catalog.Version{catalog.V[PlacedV1](1), catalog.V[PlacedV2](2, catalog.Upcast(PlacedV2FromV1))}},
		catalog.Event[PaidV1](TypePaid, "Payment for an order was captured."),
		catalog.Event[ShippedV1](TypeShipped, "An order left the warehouse."),
		{Name: TypeCancelled, Doc: "An order was cancelled before shipping.",
			Versions: []catalog.Version{catalog.V[CancelledV1](1)}, Discriminator: "reason"},
	},
	Tracks: []catalog.Entity{
		{Name: Entity, Doc: "One item per order in the orders table, versioned from 1.",
			TableEnv: EnvTable, TenantAttr: AttrTenant, IDAttr: AttrID, VersionAttr: keys.AttrVersion},
	},
}

// Item is one order line.
type Item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// PlacedV1 is order.placed schema version 1.
type PlacedV1 struct {
	OrderID       string `json:"order_id"`
	CustomerEmail string `json:"customer_email"`
	Items         []Item `json:"items"`
	TotalCents    int64  `json:"total_cents"`
}

// PlacedV2 is order.placed schema version 2: it adds the currency.
type PlacedV2 struct {
	OrderID       string `json:"order_id"`
	CustomerEmail string `json:"customer_email"`
	Items         []Item `json:"items"`
	TotalCents    int64  `json:"total_cents"`
	Currency      string `json:"currency"` // ISO 4217, e.g. EUR
}

// PlacedV2FromV1 upcasts order.placed v1 to v2, for readers that take
// PlacedV2: a v1 order was in euros, the one currency the shop had before
// v2 recorded it.
func PlacedV2FromV1(p PlacedV1) (PlacedV2, error) {
	return PlacedV2{OrderID: p.OrderID, CustomerEmail: p.CustomerEmail, Items: p.Items, TotalCents: p.TotalCents, Currency: "EUR"}, nil
}

// PaidV1 is order.paid schema version 1.
type PaidV1 struct {
	OrderID       string `json:"order_id"`
	CustomerEmail string `json:"customer_email"`
	AmountCents   int64  `json:"amount_cents"`
	PaymentRef    string `json:"payment_ref"`
}

// ShippedV1 is order.shipped schema version 1.
type ShippedV1 struct {
	OrderID        string `json:"order_id"`
	CustomerEmail  string `json:"customer_email"`
	Carrier        string `json:"carrier"`
	TrackingNumber string `json:"tracking_number,omitempty"`
}

// CancelledV1 is order.cancelled schema version 1.
type CancelledV1 struct {
	OrderID       string `json:"order_id"`
	CustomerEmail string `json:"customer_email"`
	Reason        string `json:"reason"` // e.g. "customer", "out_of_stock", "payment_failed"
}
