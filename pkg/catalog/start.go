package catalog

import (
	"fmt"
	"strconv"
	"time"
)

// StartKind says where a DURABLE subscription's delivery begins.
type StartKind string

// Start kinds. The zero value is StartLive.
const (
	// StartLive (the default): nothing committed before the subscription
	// first went live is delivered to it. The moment it went live is
	// recorded durably the first time a consumer (or dlq-repair) serves it.
	StartLive StartKind = ""
	// StartSeq: every tenant's events from Start.Seq on.
	StartSeq StartKind = "seq"
	// StartTime: events that occurred at or after Start.Time.
	StartTime StartKind = "time"
	// StartAll: all history (what every subscription got before starts
	// existed). Older events reach it through dlq-repair's sweep; prefer
	// StartLive and an explicit backfill, which is rate-limited.
	StartAll StartKind = "all"
)

// Start is the declared start of a DURABLE subscription (Subscription.Start).
// History before the start reaches the subscription only through an
// explicit backfill (`fourlanes backfill`).
type Start struct {
	Kind StartKind
	Seq  int64     // StartSeq: the first seq delivered, >= 1
	Time time.Time // StartTime: the earliest occurred_at delivered
}

// FromSeq starts a subscription at seq (every tenant's events from seq on).
func FromSeq(seq int64) Start { return Start{Kind: StartSeq, Seq: seq} }

// FromTime starts a subscription at events that occurred at or after t.
func FromTime(t time.Time) Start { return Start{Kind: StartTime, Time: t.UTC()} }

// FromAll starts a subscription at the beginning of every tenant's log.
func FromAll() Start { return Start{Kind: StartAll} }

// String renders the start as the operator sees it in reports: "live",
// "seq:5", "time:2026-01-02T03:04:05Z" or "all".
func (s Start) String() string {
	switch s.Kind {
	case StartLive:
		return "live"
	case StartSeq:
		return "seq:" + strconv.FormatInt(s.Seq, 10)
	case StartTime:
		return "time:" + s.Time.UTC().Format(time.RFC3339Nano)
	}
	return string(s.Kind)
}

// ParseStart is the inverse of String.
func ParseStart(v string) (Start, error) {
	switch {
	case v == "live" || v == "":
		return Start{}, nil
	case v == "all":
		return FromAll(), nil
	case len(v) > 4 && v[:4] == "seq:":
		n, err := strconv.ParseInt(v[4:], 10, 64)
		if err != nil || n < 1 {
			return Start{}, fmt.Errorf("start %q: the seq must be an integer >= 1", v)
		}
		return FromSeq(n), nil
	case len(v) > 5 && v[:5] == "time:":
		t, err := time.Parse(time.RFC3339Nano, v[5:])
		if err != nil {
			return Start{}, fmt.Errorf("start %q: the time must be RFC 3339", v)
		}
		return FromTime(t), nil
	}
	return Start{}, fmt.Errorf("start %q: want live, all, seq:N or time:RFC3339", v)
}

// check names what is wrong with the start of a subscription on lane.
func (s Start) check(lane Lane) string {
	if s != (Start{}) && lane != Durable {
		return fmt.Sprintf("declares Start %s on lane %s; only DURABLE subscriptions have a start (the others see only what is emitted while they run)", s, lane)
	}
	switch s.Kind {
	case StartLive, StartAll:
		if s.Seq != 0 || !s.Time.IsZero() {
			return fmt.Sprintf("Start %s carries a seq or time it does not use; write catalog.FromSeq(n) or catalog.FromTime(t)", s)
		}
	case StartSeq:
		if s.Seq < 1 {
			return fmt.Sprintf("Start.Seq is %d; seqs begin at 1 (catalog.FromSeq(1) is all history, catalog.FromAll() says so)", s.Seq)
		}
	case StartTime:
		if s.Time.IsZero() {
			return "Start.Time is zero; write catalog.FromTime(t) with the earliest occurred_at to deliver"
		}
	default:
		return fmt.Sprintf("Start.Kind %q is not a start kind; use catalog.FromSeq, catalog.FromTime or catalog.FromAll (the zero Start is live)", s.Kind)
	}
	return ""
}
