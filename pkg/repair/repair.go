package repair

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// SQS is the part of the SQS API a run uses.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Streams is the part of the DynamoDB Streams API a run uses.
type Streams interface {
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Scanner scans tables: the events and tracked tables when the stream no
// longer has a batch. The state table is never scanned: the tenants with
// dead letters come from its dead-letter index (DeadLetters).
type Scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Log reads the log (*eventstore.Store): a tenant's events and head, and
// the tenants.
type Log interface {
	Events(ctx context.Context, tenant string, after int64, limit int32) (eventstore.Page, error)
	Head(ctx context.Context, tenant string) (*chain.Head, error)
	Tenants(ctx context.Context, cursor string, limit int32) ([]string, string, error)
}

// Deliverer redelivers events and replays dead-lettered subscriptions
// (*delivery.Deliverer).
type Deliverer interface {
	Deliver(ctx context.Context, e envelope.Envelope) (delivery.Result, error)
	Replay(ctx context.Context, e envelope.Envelope, subscription string) (delivery.SubResult, error)
	// Watermarks and Settled read and move the delivery watermarks.
	Watermarks(ctx context.Context, tenant string) (map[string]delivery.Watermark, error)
	Settled(ctx context.Context, tenant string, seqs []int64) (map[string]int64, error)
	// DeliverTo delivers an event to one subscription, whatever its start
	// (a backfill).
	DeliverTo(ctx context.Context, e envelope.Envelope, sub string) (delivery.SubResult, error)
}

// DeadLetters lists open dead letters (*delivery.DynamoStore): the
// tenants that have some, from the dead-letter index, and a tenant's.
type DeadLetters interface {
	DeadLetters(ctx context.Context, tenant, cursor string, limit int32) ([]delivery.DeadLetter, string, error)
	DeadLetterTenants(ctx context.Context, cursor string, limit int) ([]string, string, error)
}

// Feed re-runs the change feed (*changefeed.Feed).
type Feed interface {
	Entity(table string) (catalog.Entity, bool)
	Apply(ctx context.Context, r changefeed.Record) (changefeed.Change, error)
	Record(ctx context.Context, c changefeed.Change) error
}

// Cursors saves and reads positions of long reads (*delivery.DynamoStore).
type Cursors interface {
	SaveCursor(ctx context.Context, name string, key map[string]types.AttributeValue, now time.Time) error
	Cursor(ctx context.Context, name string) (map[string]types.AttributeValue, error)
}

var _ Cursors = (*delivery.DynamoStore)(nil)

// Reapplier applies an item as re-read from its table to a projection,
// closing the gap a lost change left (search.Projector.Repair).
type Reapplier interface {
	Repair(ctx context.Context, tenant, entity, id string, version int64, item map[string]any) error
}

var (
	_ Log         = (*eventstore.Store)(nil)
	_ Deliverer   = (*delivery.Deliverer)(nil)
	_ DeadLetters = (*delivery.DynamoStore)(nil)
	_ Feed        = (*changefeed.Feed)(nil)
)

// Config configures a Repairer. Every queue URL and table is required.
type Config struct {
	SQS         SQS
	Streams     Streams
	DB          Scanner
	Log         Log
	Deliverer   Deliverer
	DeadLetters DeadLetters
	Feed        Feed
	// Projections are repaired from table re-reads (see Reapplier).
	Projections []Reapplier
	// Backfills keeps backfill cursors and the quarantine list; without it
	// a backfill request is refused. Subscriptions (the registry) lets a
	// backfill request naming no DURABLE subscription be refused before
	// anything is read.
	Backfills     delivery.BackfillStore
	Subscriptions Subscriptions
	// Cursors saves the position of a table re-read (the table fallback of
	// a metadata-only message) so the next run resumes it
	// (*delivery.DynamoStore); ScanPage caps a page of it (default: 1 MB
	// pages as DynamoDB sends them).
	Cursors  Cursors
	ScanPage int32

	DurableDLQ    string // URL of the DURABLE FIFO DLQ
	PipeDLQ       string // URL of the events Pipe's DLQ
	ChangeFeedDLQ string // URL of the change feed's on-failure queue
	EventsTable   string
	StateTable    string

	Logger  *slog.Logger
	Metrics *obs.Metrics
	// Reserve is kept back from the invocation's deadline to answer
	// (default 10 s); Budget caps a run without a deadline (default 4 min).
	Reserve time.Duration
	Budget  time.Duration
	// MaxItems caps the items listed per source (default 200).
	MaxItems int
	// UnsettledAfter is how old a tenant's first unsettled event must be
	// before the unsettled source sweeps it (default 5 min; see
	// unsettled.go).
	UnsettledAfter time.Duration
	// ReplayBackoff is the pause before a dead letter's first replay after
	// it failed, doubling with each failed replay up to MaxReplayBackoff
	// (defaults 1 min and 24 h). ReplayCap is how many failed replays a
	// dead letter gets before dlq-repair quarantines it (default 10): it
	// then stays open, listed and alarmed, replayed only after an operator
	// releases it.
	ReplayBackoff    time.Duration
	MaxReplayBackoff time.Duration
	ReplayCap        int
	// ClaimRetention is how long completed claims are kept
	// (delivery.Config.Retention, default 30 days): the unsettled source
	// does not redeliver an event older than that, which a store without
	// watermarks yet (a stack upgraded to them) would otherwise send again.
	ClaimRetention time.Duration
	// Retirer and Declared (the catalog's DURABLE subscriptions,
	// delivery.DurableSubscriptions: not the registry, so a subscription
	// declared but not bound here is never retired) enable the retire
	// source; RetireGrace is how long a subscription must have been
	// undeclared before it is retired (default keys.RetireGraceHours).
	Retirer     Retirer
	Declared    []string
	RetireGrace time.Duration
	Now         func() time.Time
}

// Repairer drains the dead-letter queues and dead letters. Runs must not
// overlap (infra reserves a concurrency of one).
type Repairer struct {
	cfg Config
	// onPage, while a table re-read runs, saves its position after each
	// page (runs do not overlap, so one at a time).
	onPage func(next map[string]types.AttributeValue) error
}

// New returns a Repairer.
func New(cfg Config) (*Repairer, error) {
	var missing []string
	for name, ok := range map[string]bool{
		"SQS": cfg.SQS != nil, "Streams": cfg.Streams != nil, "DB": cfg.DB != nil, "Log": cfg.Log != nil,
		"Deliverer": cfg.Deliverer != nil, "DeadLetters": cfg.DeadLetters != nil, "Feed": cfg.Feed != nil,
		"DurableDLQ": cfg.DurableDLQ != "", "PipeDLQ": cfg.PipeDLQ != "", "ChangeFeedDLQ": cfg.ChangeFeedDLQ != "",
		"EventsTable": cfg.EventsTable != "", "StateTable": cfg.StateTable != "",
	} {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("repair: Config lacks %v", missing)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Reserve <= 0 {
		cfg.Reserve = 10 * time.Second
	}
	if cfg.Budget <= 0 {
		cfg.Budget = 4 * time.Minute
	}
	if cfg.MaxItems <= 0 {
		cfg.MaxItems = 200
	}
	if cfg.UnsettledAfter <= 0 {
		cfg.UnsettledAfter = 5 * time.Minute
	}
	if cfg.ReplayBackoff <= 0 {
		cfg.ReplayBackoff = time.Minute
	}
	if cfg.MaxReplayBackoff <= 0 {
		cfg.MaxReplayBackoff = 24 * time.Hour
	}
	if cfg.ReplayCap <= 0 {
		cfg.ReplayCap = 10
	}
	if cfg.ClaimRetention <= 0 {
		cfg.ClaimRetention = 30 * 24 * time.Hour
	}
	if cfg.RetireGrace <= 0 {
		cfg.RetireGrace = keys.RetireGraceHours * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Repairer{cfg: cfg}, nil
}

// ErrUnknownSource: a Request names a source that does not exist.
var ErrUnknownSource = errors.New("unknown repair source")

// Handle runs one drain. It returns an error only for a request it cannot
// run (an unknown source); everything else is in the report.
func (r *Repairer) Handle(ctx context.Context, req Request) (Report, error) {
	sources := req.Sources
	if len(sources) == 0 {
		sources = AllSources
	}
	for _, s := range sources {
		if !slices.Contains(AllSources, s) {
			return Report{}, fmt.Errorf("%w %q (known: %v)", ErrUnknownSource, s, AllSources)
		}
	}
	start := r.cfg.Now()
	end := start.Add(r.cfg.Budget)
	if dl, ok := ctx.Deadline(); ok {
		end = dl.Add(-r.cfg.Reserve)
	}
	rep := Report{StartedAt: envelope.FormatTime(start), Complete: true, Sources: map[string]*SourceReport{}}
	if req.Backfill != nil {
		return r.handleBackfill(ctx, *req.Backfill, rep, start, end)
	}
	if req.ReindexDeadLetters {
		sources = []string{SourceReindex}
	}
	r.cfg.Logger.InfoContext(ctx, "dlq-repair run", slog.Any(obs.KeySources, sources), slog.Any(obs.KeyTenants, req.Tenants), slog.Time(obs.KeyUntil, end))
	for i, src := range sources {
		sr := &SourceReport{Items: []Item{}, max: r.cfg.MaxItems}
		rep.Sources[src] = sr
		share := time.Until(end) / time.Duration(len(sources)-i)
		if share <= 0 {
			sr.Error = "no time left in this run"
			rep.Complete = false
			continue
		}
		sctx, cancel := context.WithDeadline(ctx, time.Now().Add(share))
		var err error
		switch src {
		case SourceDurableDLQ:
			sr.Complete, err = r.drainDurable(sctx, sr, end)
		case SourcePipeDLQ:
			sr.Complete, err = r.drainMetadata(sctx, sr, src, r.cfg.PipeDLQ, end)
		case SourceChangeFeedDLQ:
			sr.Complete, err = r.drainMetadata(sctx, sr, src, r.cfg.ChangeFeedDLQ, end)
		case SourceDeadLetters:
			sr.Complete, err = r.drainDeadLetters(sctx, sr, req.Tenants)
		case SourceRetire:
			sr.Complete, err = r.drainRetire(sctx, sr, &rep)
		case SourceReindex:
			sr.Complete, err = r.reindexDeadLetters(sctx, sr)
		case SourceUnsettled:
			after := r.cfg.UnsettledAfter
			if req.UnsettledAfterSeconds != nil {
				after = time.Duration(max(0, *req.UnsettledAfterSeconds)) * time.Second
			}
			sr.Complete, err = r.drainUnsettled(sctx, sr, req.Tenants, after)
		}
		cancel()
		if err != nil {
			sr.Error = err.Error()
			r.cfg.Logger.ErrorContext(ctx, "repair source failed", slog.String(obs.KeySource, src), obs.Err(err))
		}
		if !sr.Complete {
			rep.Complete = false
		}
		rep.Fixed += sr.Fixed
		rep.Open += sr.Open
		if sr.Fixed > 0 {
			r.cfg.Metrics.Count(keys.MetricRepaired, sr.Fixed, "Source", src)
		}
		if sr.Open > 0 {
			r.cfg.Metrics.Count(keys.MetricRepairOpen, sr.Open, "Source", src)
		}
	}
	fin := r.cfg.Now()
	rep.FinishedAt = envelope.FormatTime(fin)
	rep.DurationMS = fin.Sub(start).Milliseconds()
	r.cfg.Logger.InfoContext(ctx, "dlq-repair done", slog.Int(obs.KeyFixed, rep.Fixed), slog.Int(obs.KeyOpen, rep.Open), slog.Bool(obs.KeyComplete, rep.Complete),
		slog.Int64(obs.KeyDurationMs, rep.DurationMS))
	return rep, nil
}

// handleBackfill runs a backfill request alone.
func (r *Repairer) handleBackfill(ctx context.Context, req BackfillRequest, rep Report, start, end time.Time) (Report, error) {
	if err := req.validate(r.cfg.Subscriptions); err != nil {
		return Report{}, err
	}
	sr := &SourceReport{Items: []Item{}, max: r.cfg.MaxItems}
	rep.Sources[SourceBackfill] = sr
	bctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	b, err := r.runBackfill(bctx, req, sr)
	if err != nil {
		sr.Error = err.Error()
		r.cfg.Logger.ErrorContext(ctx, "backfill failed", slog.String(obs.KeySubscription, req.Subscription), obs.Err(err))
	}
	rep.Backfill = b
	sr.Complete = err == nil && b != nil && b.Done
	rep.Complete, rep.Open = sr.Complete, sr.Open
	if sr.Open > 0 {
		r.cfg.Metrics.Count(keys.MetricRepairOpen, sr.Open, "Source", SourceBackfill)
	}
	fin := r.cfg.Now()
	rep.FinishedAt = envelope.FormatTime(fin)
	rep.DurationMS = fin.Sub(start).Milliseconds()
	r.cfg.Logger.InfoContext(ctx, "backfill run done", slog.String(obs.KeySubscription, req.Subscription), slog.Int(obs.KeyOpen, rep.Open),
		slog.Bool(obs.KeyComplete, rep.Complete), slog.Int64(obs.KeyDurationMs, rep.DurationMS))
	return rep, nil
}

// record logs an item (fixed at info, open at error) and adds it to the report.
func (r *Repairer) record(ctx context.Context, sr *SourceReport, it Item) {
	attrs := []any{slog.String(obs.KeySource, it.Source), slog.String(obs.KeyOutcome, it.Outcome), slog.String(obs.KeyLane, laneOf[it.Source])}
	attrs = append(attrs, obs.NonEmpty(obs.KeyMessageID, it.MessageID), obs.NonEmpty(obs.KeyTenant, it.Tenant),
		obs.NonEmpty(obs.KeyEventID, it.EventID), obs.NonEmpty(obs.KeySubscription, it.Subscription),
		obs.NonEmpty(obs.KeyReason, it.Reason), obs.NonEmpty(obs.KeyVia, it.Via), obs.NonEmpty(obs.KeyErr, it.Error))
	if it.Seq > 0 {
		attrs = append(attrs, slog.Int64(obs.KeySeq, it.Seq))
	}
	if it.Stream != nil {
		attrs = append(attrs, slog.String(obs.KeyStreamARN, it.Stream.ARN), slog.String(obs.KeyShard, it.Stream.Shard),
			slog.String(obs.KeyStartSeq, it.Stream.Start), slog.String(obs.KeyEndSeq, it.Stream.End))
	}
	if it.Outcome == Fixed {
		r.cfg.Logger.InfoContext(ctx, "repaired", attrs...)
	} else {
		r.cfg.Logger.ErrorContext(ctx, "left open", attrs...)
	}
	sr.add(it)
}

// laneOf is the lane whose failures each source holds, for log records.
var laneOf = map[string]string{
	SourceDurableDLQ:    string(catalog.Durable),
	SourcePipeDLQ:       string(catalog.Durable),
	SourceChangeFeedDLQ: string(catalog.BestEffort),
	SourceDeadLetters:   string(catalog.Durable),
	SourceUnsettled:     string(catalog.Durable),
	SourceBackfill:      string(catalog.Durable),
	SourceReindex:       string(catalog.Durable),
}

// ---- the log: the source of truth for events ----

// errNotInLog: the log has no event at (tenant, seq).
var errNotInLog = errors.New("not in the log")

// readEvent reads the event at (tenant, seq) from the log and checks it
// (chain.CheckStored).
func (r *Repairer) readEvent(ctx context.Context, tenant string, seq int64) (envelope.Envelope, error) {
	if tenant == "" || seq < 1 {
		return envelope.Envelope{}, fmt.Errorf("tenant %q seq %d: %w", tenant, seq, errNotInLog)
	}
	p, err := r.cfg.Log.Events(ctx, tenant, seq-1, 1)
	if err != nil {
		return envelope.Envelope{}, err
	}
	if len(p.Events) == 0 || p.Raw[0] == nil || (p.Errs[0] == nil && p.Events[0].Seq != seq) {
		return envelope.Envelope{}, fmt.Errorf("tenant %s seq %d: %w", tenant, seq, errNotInLog)
	}
	if p.Errs[0] != nil {
		return envelope.Envelope{}, fmt.Errorf("tenant %s seq %d: the log's row does not decode: %w", tenant, seq, p.Errs[0])
	}
	e := p.Events[0]
	if err := chain.CheckStored(&e); err != nil {
		return e, fmt.Errorf("the log's row: %w", err) // names tenant, seq, and reconcile
	}
	return e, nil
}

// deliver redelivers an event re-read from the log and says whether it is
// done, with each subscription's outcome.
func (r *Repairer) deliver(ctx context.Context, e envelope.Envelope) (map[string]string, string, error) {
	res, err := r.cfg.Deliverer.Deliver(ctx, e)
	subs := map[string]string{}
	for _, s := range res.Subscriptions {
		subs[s.Subscription] = string(s.Outcome)
	}
	switch {
	case errors.Is(err, delivery.ErrNotCovered):
		return subs, "not delivered: its chain does not cover it (a planted row, or a broken link; run reconcile on the tenant)", err
	case err != nil:
		return subs, "delivery failed on infrastructure", err
	case res.RetryLater():
		return subs, "another delivery holds a claim's lease; try again later", nil
	}
	return subs, "", nil
}
