package repair

import "sync"

// Sources dlq-repair drains (Request.Sources, and the keys of Report.Sources).
const (
	SourceDurableDLQ    = "durable_dlq"
	SourcePipeDLQ       = "pipe_dlq"
	SourceChangeFeedDLQ = "changefeed_dlq"
	SourceDeadLetters   = "dead_letters"
	SourceUnsettled     = "unsettled"
)

// AllSources lists every source in the order a run drains them.
var AllSources = []string{SourceDurableDLQ, SourcePipeDLQ, SourceChangeFeedDLQ, SourceDeadLetters, SourceUnsettled, SourceRetire}

// Outcomes of an item.
const (
	Fixed = "fixed"
	Open  = "open"
)

// How an item's data was obtained (Item.Via).
const (
	ViaLog    = "log"
	ViaStream = "stream"
	ViaTable  = "table"
)

// Request is the invocation's input. Both fields are optional; any other
// input (a scheduled event) means "everything".
type Request struct {
	// Sources limits the run to these sources (default AllSources).
	Sources []string `json:"sources,omitempty"`
	// Tenants limits dead_letters and unsettled to these tenants (default:
	// every tenant with an open dead letter, and every tenant of the log).
	Tenants []string `json:"tenants,omitempty"`
	// UnsettledAfterSeconds overrides Config.UnsettledAfter for this run: 0
	// sweeps every unsettled event at once, even one still on its way.
	UnsettledAfterSeconds *int64 `json:"unsettled_after_s,omitempty"`
	// ReindexDeadLetters makes the run index the dead letters written
	// before the dead-letter index existed, and nothing else: once, after
	// the upgrade, until its report is complete (reindex.go).
	ReindexDeadLetters bool `json:"reindex_dead_letters,omitempty"`
	// Backfill, when set, makes the run a backfill and nothing else.
	Backfill *BackfillRequest `json:"backfill,omitempty"`
}

// Report is what a run fixed and what stays open.
type Report struct {
	StartedAt  string                   `json:"started_at"`
	FinishedAt string                   `json:"finished_at"`
	DurationMS int64                    `json:"duration_ms"`
	Complete   bool                     `json:"complete"`
	Fixed      int                      `json:"fixed"`
	Open       int                      `json:"open"`
	Sources    map[string]*SourceReport `json:"sources"`
	// Backfill is a backfill run's progress.
	Backfill *BackfillReport `json:"backfill,omitempty"`
	// Retiring lists the subscriptions with state that the application no
	// longer declares: in their grace period, or retired (the retire
	// source).
	Retiring []Retiring `json:"retiring,omitempty"`
}

// SourceReport is one source's part of a run.
type SourceReport struct {
	Seen  int `json:"seen"`
	Fixed int `json:"fixed"`
	Open  int `json:"open"`
	// Complete: the source was drained (a receive came back empty, every
	// tenant's dead letters were listed) within the budget.
	Complete     bool   `json:"complete"`
	Error        string `json:"error,omitempty"` // why the source could not be drained at all
	Items        []Item `json:"items"`
	ItemsOmitted int    `json:"items_omitted"`

	max int
	mu  sync.Mutex
}

// Item is one message or dead letter.
type Item struct {
	Source        string            `json:"source"`
	Outcome       string            `json:"outcome"`
	Reason        string            `json:"reason,omitempty"`
	MessageID     string            `json:"message_id,omitempty"`
	Tenant        string            `json:"tenant,omitempty"`
	EventID       string            `json:"event_id,omitempty"`
	Seq           int64             `json:"seq,omitempty"`
	Subscription  string            `json:"subscription,omitempty"`
	Subscriptions map[string]string `json:"subscriptions,omitempty"`
	Stream        *StreamRange      `json:"stream,omitempty"`
	Via           string            `json:"via,omitempty"`
	Records       int               `json:"records,omitempty"`
	Error         string            `json:"error,omitempty"`
}

// StreamRange is the part of a stream a metadata-only message names.
type StreamRange struct {
	ARN   string `json:"arn"`
	Shard string `json:"shard"`
	Start string `json:"start"`
	End   string `json:"end"`
}

func (s *SourceReport) add(it Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Seen++
	if it.Outcome == Fixed {
		s.Fixed++
	} else {
		s.Open++
	}
	if len(s.Items) < s.max {
		s.Items = append(s.Items, it)
	} else {
		s.ItemsOmitted++
	}
}
