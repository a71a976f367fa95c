package twin

import (
	"context"
	"fmt"
	"sort"
)

// Status is a snapshot of the running stack.
type Status struct {
	// Pollers are the Pipes and event source mappings, by logical ID.
	Pollers map[string]PollerStats
	// DeadLetterQueues are the queues that receive failures (redrive
	// targets, Pipe DLQs, on-failure destinations), by logical ID.
	DeadLetterQueues map[string]QueueDepth
}

// QueueDepth is a queue's message counts.
type QueueDepth struct {
	Visible, InFlight int
	// Err is set when the depth could not be read.
	Err error
}

// Status reads the pollers' counters and the dead-letter queues' depths.
func (tw *Twin) Status(ctx context.Context) Status {
	st := Status{Pollers: map[string]PollerStats{}, DeadLetterQueues: map[string]QueueDepth{}}
	for id, r := range tw.resources {
		if r.poller != nil {
			st.Pollers[id] = r.poller.stats()
		}
	}
	for _, id := range tw.DeadLetterQueues() {
		v, f, err := tw.QueueDepth(ctx, id)
		st.DeadLetterQueues[id] = QueueDepth{Visible: v, InFlight: f, Err: err}
	}
	return st
}

// DeadLetterQueues lists the logical IDs of the queues that receive
// failures: redrive targets, Pipe dead-letter queues and on-failure
// destinations.
func (tw *Twin) DeadLetterQueues() []string {
	seen := map[string]bool{}
	for _, r := range tw.resources {
		if r.queue != nil && r.queue.redriveTarget != "" {
			seen[r.queue.redriveTarget] = true
		}
	}
	for _, id := range tw.failureQueues {
		seen[id] = true
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Poller returns the counters of the Pipe or mapping with logical ID id.
func (tw *Twin) Poller(id string) (PollerStats, bool) {
	r, ok := tw.resources[id]
	if !ok || r.poller == nil {
		return PollerStats{}, false
	}
	return r.poller.stats(), true
}

// SetMappingEnabled disables or enables the stream mapping with logical ID
// id, as UpdateEventSourceMapping's Enabled does: a disabled mapping invokes
// nothing and keeps its position in each shard; enabled again, it reads on
// from there (what the stream still holds).
func (tw *Twin) SetMappingEnabled(id string, enabled bool) error {
	r, ok := tw.resources[id]
	if !ok || r.poller == nil {
		return fmt.Errorf("twin: no mapping %s", id)
	}
	c, ok := r.poller.(*streamConsumer)
	if !ok {
		return fmt.Errorf("twin: %s is not a stream mapping", id)
	}
	c.disabled.Store(!enabled)
	return nil
}
