package changefeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Reasons a record is reported for retry (the Reason dimension of
// keys.MetricChangeRetried).
const (
	RetryFailed    = "failed"    // writing the row or dispatching failed
	RetryUntracked = "untracked" // the record's table is not tracked here
	RetryNoTime    = "no_time"   // the invocation ran out of time before the record started
)

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	Feed *Feed // required
	// Registry, when set, is used at construction to log the BEST_EFFORT
	// subscriptions served and to refuse to start if one is unbound.
	Registry *catalog.Registry
	Logger   *slog.Logger
	Metrics  *obs.Metrics
	// Concurrency bounds the items applied at once (default 8); records of
	// one item are applied in stream order.
	Concurrency int
	// Reserve is the time kept back from the invocation's deadline to
	// answer (default 2 s).
	Reserve time.Duration
}

// Handler is the change feed's Lambda handler: DynamoDB stream batches in,
// the sequence number to retry from out.
type Handler struct{ cfg HandlerConfig }

// NewHandler returns a Handler. With cfg.Registry it logs the BEST_EFFORT
// subscriptions served and the tracked tables, and fails if a BEST_EFFORT
// subscription is declared but not bound.
func NewHandler(ctx context.Context, cfg HandlerConfig) (*Handler, error) {
	if cfg.Feed == nil {
		return nil, errors.New("changefeed: HandlerConfig.Feed is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Reserve <= 0 {
		cfg.Reserve = 2 * time.Second
	}
	if cfg.Registry != nil {
		if err := cfg.Registry.LogServed(ctx, cfg.Logger, catalog.BestEffort); err != nil {
			return nil, fmt.Errorf("changefeed: %w", err)
		}
	}
	for table, ent := range cfg.Feed.cfg.Tables {
		cfg.Logger.InfoContext(ctx, "feeding tracked table", slog.String(obs.KeyTable, table), slog.String(obs.KeyEntity, ent.Name),
			slog.String(obs.KeyTypes, catalog.ChangeWrittenPrefix+ent.Name+", "+catalog.ChangeDeletedPrefix+ent.Name))
	}
	return &Handler{cfg: cfg}, nil
}

// Handle applies a batch. Records of one item are applied in order, items
// in parallel. On failures it reports the sequence number of the earliest
// failed record only: the mapping checkpoints before it and retries it and
// everything after it (what after it succeeded is applied again; change
// events are duplicate-tolerant). A record without a sequence number cannot
// be reported and fails the whole batch.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	ctx = obs.WithLane(ctx, string(catalog.BestEffort))
	log := h.cfg.Logger
	n := len(ev.Records)
	log.DebugContext(ctx, "stream batch received", slog.Int(obs.KeyCount, n))
	recs := make([]Record, n)
	bad := make([]error, n) // images that do not decode
	groups := map[string][]int{}
	var order []string
	for i, raw := range ev.Records {
		if raw.Change.SequenceNumber == "" {
			return events.DynamoDBEventResponse{}, fmt.Errorf("record %d (%s) has no SequenceNumber: cannot report it, failing the batch", i, raw.EventID)
		}
		r, err := FromLambda(raw)
		recs[i], bad[i] = r, err
		k := r.Table() + "\x00" + keys.KeyString(r.Keys)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}

	dctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, dl.Add(-h.cfg.Reserve))
		defer cancel()
	}
	var (
		mu       sync.Mutex
		firstBad = n // index of the earliest failed record
		reason   = map[int]string{}
		applied  int
		rejected int
	)
	fail := func(i int, why string) {
		mu.Lock()
		defer mu.Unlock()
		reason[i] = why
		if i < firstBad {
			firstBad = i
		}
	}
	behind := func(i int) bool { // a record after a failure will be retried anyway
		mu.Lock()
		defer mu.Unlock()
		return i > firstBad
	}
	sem := make(chan struct{}, h.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, k := range order {
		idxs := groups[k]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, i := range idxs {
				if behind(i) {
					return
				}
				r := recs[i]
				if dctx.Err() != nil {
					fail(i, RetryNoTime)
					return
				}
				var (
					c   Change
					err error
				)
				if bad[i] != nil {
					err = &RejectError{Reason: RejectUnrepresentable, Detail: bad[i].Error()}
					log.ErrorContext(ctx, "stream record images do not decode; skipped (retrying cannot fix it)",
						slog.String(obs.KeyStreamEventID, r.EventID), slog.String(obs.KeyStreamSeq, r.SequenceNumber), obs.Err(err))
					h.cfg.Metrics.Count(keys.MetricChangeRejected, 1, "Reason", RejectUnrepresentable)
				} else {
					c, err = h.cfg.Feed.Apply(dctx, r)
				}
				var rej *RejectError
				switch {
				case err == nil:
					mu.Lock()
					applied++
					mu.Unlock()
				case errors.As(err, &rej):
					mu.Lock()
					rejected++
					mu.Unlock()
				default:
					why := RetryFailed
					if errors.Is(err, ErrUntracked) {
						why = RetryUntracked
					}
					fail(i, why)
					lctx := ctx
					if c.Envelope.ID != "" {
						lctx = obs.WithEvent(tenancy.MustWithTenant(ctx, c.Envelope.TenantID), c.Envelope.ID)
					}
					log.ErrorContext(lctx, "change event failed; the mapping retries from this record",
						slog.String(obs.KeyStreamEventID, r.EventID), slog.String(obs.KeyStreamSeq, r.SequenceNumber),
						slog.String(obs.KeyStreamARN, r.StreamARN), slog.String(obs.KeyReason, why), obs.Err(err))
					return
				}
			}
		})
	}
	wg.Wait()

	var resp events.DynamoDBEventResponse
	if firstBad < n {
		resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: recs[firstBad].SequenceNumber}}
		h.cfg.Metrics.Count(keys.MetricChangeRetried, 1, "Reason", reason[firstBad])
	}
	attrs := []any{slog.Int(obs.KeyCount, n), slog.Int(obs.KeyApplied, applied), slog.Int(obs.KeyRejected, rejected)}
	if firstBad < n {
		attrs = append(attrs, slog.String(obs.KeyRetryFromSeq, recs[firstBad].SequenceNumber), slog.Int(obs.KeyRetryFromIndex, firstBad),
			slog.Int(obs.KeyFailed, len(reason)))
	}
	log.InfoContext(ctx, "stream batch done", attrs...)
	return resp, nil
}
