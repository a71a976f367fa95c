package twin

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Kinds of journal entries.
const (
	// KindInvoke: one invocation of a function, with its outcome.
	KindInvoke = "invoke"
	// KindDelivered: records or messages a source handed on successfully
	// (stream records checkpointed past, queue messages deleted, messages
	// sent to a Pipe's target).
	KindDelivered = "delivered"
	// KindRetry: a failed batch is retried whole.
	KindRetry = "retry"
	// KindBisect: a failed batch is split in two; the halves are retried
	// without consuming the retry budget.
	KindBisect = "bisect"
	// KindDestination: records given up on; their metadata went to the
	// on-failure destination or dead-letter queue.
	KindDestination = "destination"
	// KindFiltered: records a filter dropped before any invocation.
	KindFiltered = "filtered"
	// KindDuplicate: a message SQS accepted and dropped as a duplicate
	// (same deduplication id within five minutes).
	KindDuplicate = "duplicate"
	// KindFailed: a batch failed for a reason outside the function (a
	// target path that does not resolve, a refused send, a bad response).
	KindFailed = "failed"
	// KindLeft: queue messages a failed invocation leaves to reappear after
	// the visibility timeout.
	KindLeft = "left"
)

// Entry is one thing the twin did on behalf of AWS: an invocation, a
// delivery, a retry, a split, a dead-lettering.
type Entry struct {
	Time time.Time
	Kind string
	// Source is the resource acting: the Pipe, the event source mapping,
	// the Function URL or the Invoke API, by logical ID.
	Source   string
	Function string
	// RequestID of the invocation (KindInvoke), or of the last invocation
	// the entry is about.
	RequestID string
	Shard     string
	// Items are the stream sequence numbers or SQS message ids concerned.
	Items []string
	// Keys describe the records, for a human reader (tenant_id=t1 seq=4).
	Keys []string
	// Outcome is "ok" or the failure, in words.
	Outcome string
	// Attempt numbers the invocations of this exact batch (1 = first).
	Attempt int
	Detail  string
}

// OK reports whether the entry records a success.
func (e Entry) OK() bool { return e.Outcome == "ok" }

// Journal records what the twin did, in order, and logs each entry.
type Journal struct {
	log *slog.Logger
	mu  sync.Mutex
	all []Entry
	// max bounds memory in a long `make dev`; the oldest entries go first.
	max int
}

func newJournal(log *slog.Logger) *Journal { return &Journal{log: log, max: 200_000} }

func (j *Journal) add(e Entry) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	j.mu.Lock()
	if len(j.all) >= j.max {
		j.all = append(j.all[:0], j.all[len(j.all)/2:]...)
	}
	j.all = append(j.all, e)
	j.mu.Unlock()
	level := slog.LevelInfo
	switch e.Kind {
	case KindDestination, KindFailed, KindDuplicate:
		level = slog.LevelWarn
	case KindInvoke:
		if !e.OK() {
			level = slog.LevelWarn
		}
	}
	attrs := []slog.Attr{slog.String(obs.KeyKind, e.Kind), slog.String(obs.KeySource, e.Source)}
	attrs = append(attrs, obs.NonEmpty(obs.KeyFunction, e.Function), obs.NonEmpty(obs.KeyRequestID, e.RequestID),
		obs.NonEmpty(obs.KeyShard, e.Shard))
	if len(e.Items) > 0 {
		attrs = append(attrs, slog.Any(obs.KeyItems, e.Items))
	}
	if len(e.Keys) > 0 {
		attrs = append(attrs, slog.Any(obs.KeyKeys, e.Keys))
	}
	if e.Attempt > 0 {
		attrs = append(attrs, slog.Int(obs.KeyAttempt, e.Attempt))
	}
	attrs = append(attrs, obs.NonEmpty(obs.KeyOutcome, e.Outcome), obs.NonEmpty(obs.KeyDetail, e.Detail))
	j.log.LogAttrs(context.Background(), level, "twin "+e.Kind, attrs...)
}

// Entries returns the entries that match, in order; a nil match returns all.
func (j *Journal) Entries(match func(Entry) bool) []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Entry
	for _, e := range j.all {
		if match == nil || match(e) {
			out = append(out, e)
		}
	}
	return out
}

// Count returns how many entries match.
func (j *Journal) Count(match func(Entry) bool) int { return len(j.Entries(match)) }

// FormatEntries renders entries one per line, for test logs and readers
// checking them against the bisect rule.
func FormatEntries(es []Entry) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString(e.Time.Format("15:04:05.000"))
		b.WriteString(" ")
		b.WriteString(e.Kind)
		b.WriteString(" ")
		b.WriteString(e.Source)
		if e.Function != "" {
			b.WriteString(" fn=" + e.Function)
		}
		if e.Attempt > 0 {
			b.WriteString(" attempt=")
			b.WriteString(itoa(e.Attempt))
		}
		if len(e.Items) > 0 {
			b.WriteString(" items=[" + strings.Join(e.Items, " ") + "]")
		}
		if len(e.Keys) > 0 {
			b.WriteString(" keys=[" + strings.Join(e.Keys, "; ") + "]")
		}
		if e.Outcome != "" {
			b.WriteString(" → " + e.Outcome)
		}
		if e.Detail != "" {
			b.WriteString(" (" + e.Detail + ")")
		}
		b.WriteString("\n")
	}
	return b.String()
}
