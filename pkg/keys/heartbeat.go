package keys

// The heartbeat (pkg/heartbeat): a synthetic event the stack writes to
// itself on a schedule, through Emit, the stream, the Pipe, the FIFO queue
// and durable-consumer like every event, so that a stopped Pipe, a disabled
// event source mapping or a broken consumer alarms on a stack with no
// traffic of its own. Its chain is tenancy.HeartbeatTenant.
const (
	// FnHeartbeat writes one heartbeat per scheduled invocation.
	FnHeartbeat = "heartbeat"
	// HeartbeatModule is the framework's built-in module (app.Application
	// adds it to every application).
	HeartbeatModule = "fourlanes"
	// HeartbeatType is the heartbeat's event type (schema version 1).
	HeartbeatType = "fourlanes.heartbeat"
	// HeartbeatSubscription is the built-in DURABLE subscriber that records
	// each heartbeat's arrival.
	HeartbeatSubscription = "fourlanes.heartbeat-monitor"

	// MetricHeartbeatsDelivered counts heartbeats handled (dimension Lane);
	// its alarm treats missing data as breaching.
	MetricHeartbeatsDelivered = "HeartbeatsDelivered"
	// MetricHeartbeatLag is a heartbeat's commit → handled, in milliseconds
	// (dimension Lane).
	MetricHeartbeatLag = "HeartbeatLag"
)
