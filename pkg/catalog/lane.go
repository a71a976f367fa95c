package catalog

// Lane is a delivery lane. Each lane has exactly one dispatcher, so a
// subscription on the wrong lane is not degraded, it is unreachable.
type Lane string

// The four lanes.
const (
	// Inline is dispatched by Emit after the commit, awaited; an error reaches
	// Emit's caller. Fail-closed, for the critical path.
	Inline Lane = "INLINE"
	// Local is dispatched by Emit after the commit, isolated: a panic or an
	// error is logged and counted and never reaches the caller. Finished
	// before the Lambda invocation returns (lanes.InProcess.Flush).
	Local Lane = "LOCAL"
	// Durable is dispatched only by the durable consumer (delivery.Deliver):
	// at-least-once, idempotent per (event, subscription), dead-lettered per
	// subscription.
	Durable Lane = "DURABLE"
	// BestEffort is dispatched only by the change feed (record.* change
	// events): unordered, duplicate-tolerant, no dead letter, no back-pressure.
	BestEffort Lane = "BEST_EFFORT"
)

// LaneFor is the lane a subscription to the type glob types, declared with
// lane, runs on: lane when it is set; BestEffort when it is not and types can
// match change events (record.*), which only the change feed dispatches, so
// that no other lane could be meant; otherwise "" (unset), which Validate
// refuses, naming the lanes to choose from.
func LaneFor(types string, lane Lane) Lane {
	if lane == "" && CouldMatchPrefix(types, ChangePrefix) {
		return BestEffort
	}
	return lane
}

// Lanes lists every lane in dispatch order.
var Lanes = []Lane{Inline, Local, Durable, BestEffort}

// Valid reports whether l is one of the four lanes.
func (l Lane) Valid() bool {
	switch l {
	case Inline, Local, Durable, BestEffort:
		return true
	}
	return false
}

// Dispatcher names the one component that dispatches the lane.
func (l Lane) Dispatcher() string {
	switch l {
	case Inline, Local:
		return "Emit (lanes.InProcess)"
	case Durable:
		return "the durable consumer (delivery.Deliver)"
	case BestEffort:
		return "the change feed (lanes.BestEffort)"
	}
	return "nothing"
}
