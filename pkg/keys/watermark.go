package keys

// Delivery watermarks (pkg/delivery, pkg/reconcile, pkg/repair): how far a
// DURABLE subscription is settled (completed or dead-lettered) for a tenant.
//
//	watermark      pk watermark#<tenant_id>   sk <subscription>
//
// Attributes: AttrSeq (N, the last seq settled with every earlier one),
// AttrTenant, AttrSubscription, AttrUpdatedAt (when it last moved). Query
// pk = watermark#<tenant> reads a tenant's watermarks in one request.
const StateWatermarkPrefix = "watermark#"

// Metrics of the delivery audit.
const (
	// MetricNotInLog counts queue messages durable-consumer refused because
	// their event is not in the log (absent at its seq, or another hash).
	MetricNotInLog = "NotInLog"
	// MetricNotCovered counts events delivery refused because the chain
	// does not cover them: a seq above the tenant's head, or a prev_hash
	// that is not the hash of the event before (a planted row).
	MetricNotCovered = "NotCovered"
	// MetricUnsettledEvents is, per Subscription, the events of a tenant
	// above the subscription's watermark and at or below the head
	// (reconcile emits it per tenant walked).
	MetricUnsettledEvents = "UnsettledEvents"
	// MetricUnsettledAge is, per Subscription, the age in seconds of the
	// oldest event above the watermark (0 when settled): the stalled
	// delivery watermark alarm watches its maximum.
	MetricUnsettledAge = "UnsettledAgeSeconds"
	// MetricWatermarkFailed counts watermark writes that failed (delivery
	// itself succeeded; the watermark catches up on a later batch or repair).
	MetricWatermarkFailed = "WatermarkFailed"
)
