// Package enrich is the events Pipe's enrichment step (the stream-filter function):
// it turns a batch of DynamoDB stream records of the events table into the
// envelopes the FIFO target receives, one per new event row, in order.
//
// What it promises:
//
//   - Only INSERTed event rows pass. Head rows, MODIFY and REMOVE records are
//     dropped; each drop is logged (WARN, with its reason, tenant and seq) and
//     counted (EMF DroppedRows, dimension Reason). The Pipe's filter should
//     already have removed head rows and REMOVE records, so seeing them here
//     says the filter is missing; a MODIFY or REMOVE of an event row says
//     someone rewrote the insert-only log.
//   - A head row must carry its stamps (tenant_id, and dedup_id =
//     eventstore.HeadDedupID(last_event_id), never equal to an event id). One
//     without them fails the whole batch: the stamps are what keep a head
//     row harmless on the FIFO target if the filter is ever missing.
//   - Every event's stored hash is recomputed from its canonical bytes, and
//     consecutive events of a tenant in one batch must link (prev_hash). Any
//     violation, or a record that does not decode, fails the whole batch
//     with an error naming every bad record (tenant and seq), so the Pipe
//     bisects, retries and finally dead-letters it; nothing unverified
//     reaches a subscriber.
//   - An event whose type or schema version this build's catalog does not
//     declare, its integrity checked as above, is passed on: logged (WARN,
//     naming type, version, tenant and seq) and counted
//     (keys.MetricUndeclaredEvents by Type and Version, alarmed on).
//
// Deploy in any order. The catalog is compiled into each binary, so a
// producer may ship a new type or version before the backbone is
// redeployed. Refusing such an event would fail its whole Pipe batch, every
// tenant and type on the shard with it, until bisection and retries put it
// in the Pipe DLQ. Its hash and link say it is the log's event, which is
// all the enrichment vouches for; whether a subscriber can read it is the
// subscriber's to say: on the DURABLE lane one that cannot read the
// version is dead-lettered alone (lanes.VersionError) and replayed by
// dlq-repair once a backbone that reads it is deployed; its siblings and
// the rest of the batch go on.
package enrich

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Sentinel errors: every *RecordError wraps one of them.
var (
	// ErrUndecodable: the record is not a stream record of the events table.
	ErrUndecodable = errors.New("undecodable stream record")
	// ErrHashMismatch: the stored hash is not the hash of the event's
	// canonical bytes; the row was edited after it was written.
	ErrHashMismatch = errors.New("stored hash does not match the event")
	// ErrBrokenLink: an event's prev_hash is not the hash of the tenant's
	// previous event in the same batch.
	ErrBrokenLink = errors.New("prev_hash does not link to the previous event")
	// ErrUnstampedHead: a head row lacks tenant_id or a dedup_id derived from
	// its last event id.
	ErrUnstampedHead = errors.New("head row without its stamps")
)

// Drop reasons: the Reason dimension of keys.MetricDroppedRows.
const (
	DropHeadRow        = "head_row"
	DropIdempotencyRow = "idempotency_row"
	DropModify         = "modify"
	DropRemove         = "remove"
)

// Reject reasons: the Reason dimension of keys.MetricRejectedRecords.
const (
	rejectUndecodable = "undecodable"
	rejectHash        = "hash_mismatch"
	rejectLink        = "broken_link"
	rejectUnstamped   = "unstamped_head"
)

// RecordError names one record that failed the batch.
type RecordError struct {
	Index   int    // position in the batch
	EventID string // the stream record's eventID
	Tenant  string // "" when the record does not say
	Seq     int64  // -1 when the record does not say
	Err     error
}

func (e *RecordError) Error() string {
	where := fmt.Sprintf("record %d (stream eventID %q", e.Index, e.EventID)
	if e.Tenant != "" {
		where += fmt.Sprintf(", tenant %q", e.Tenant)
	}
	if e.Seq >= 0 {
		where += fmt.Sprintf(", seq %d", e.Seq)
	}
	return where + "): " + e.Err.Error()
}

func (e *RecordError) Unwrap() error { return e.Err }

// Catalog says which event types and schema versions exist.
// *catalog.Catalog implements it.
type Catalog interface {
	Type(name string) (t catalog.EventType, module string, ok bool)
}

var _ Catalog = (*catalog.Catalog)(nil)

// Config configures a Handler.
type Config struct {
	Catalog Catalog      // required
	Logger  *slog.Logger // default slog.Default()
	// Metrics counts what the enrichment drops and rejects and how far the
	// Pipe is behind. Default: EMF lines on EMF (stdout when nil), each as
	// it is counted; main passes the Metrics it flushes once per invocation
	// (obs.PerInvocation).
	Metrics *obs.Metrics
	// EMF receives the CloudWatch EMF lines when Metrics is nil.
	EMF io.Writer
	Now func() time.Time // default time.Now
}

// Handler is the enrichment function.
type Handler struct {
	cat     Catalog
	log     *slog.Logger
	metrics *obs.Metrics
	now     func() time.Time
}

// New returns a Handler. It refuses a config without a catalog.
func New(cfg Config) (*Handler, error) {
	if cfg.Catalog == nil {
		return nil, errors.New("enrich: Config.Catalog is nil; the enrichment must know the declared event types")
	}
	h := &Handler{cat: cfg.Catalog, log: cfg.Logger, metrics: cfg.Metrics, now: cfg.Now}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.metrics == nil {
		h.metrics = obs.NewMetrics(cfg.EMF)
	}
	return h, nil
}

// Handle enriches one Pipe batch: a JSON array of DynamoDB stream records
// in, a JSON array of envelopes out (empty, never null, when every record
// was dropped: the Pipe then skips the target). An error fails the batch.
func (h *Handler) Handle(ctx context.Context, records []json.RawMessage) ([]envelope.Envelope, error) {
	out := make([]envelope.Envelope, 0, len(records))
	var errs []error
	last := map[string]envelope.Envelope{} // tenant → its previous event in this batch
	var oldest time.Time
	dropped := 0
	for i, raw := range records {
		var rec events.DynamoDBEventRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			errs = append(errs, h.reject(ctx, rejectUndecodable, &RecordError{Index: i, Seq: -1, Err: fmt.Errorf("%w: %v", ErrUndecodable, err)}))
			continue
		}
		if t := rec.Change.ApproximateCreationDateTime.Time; !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
		env, drop, err := h.record(i, rec)
		switch {
		case err != nil:
			errs = append(errs, h.reject(ctx, reason(err), err))
			continue
		case drop != nil:
			dropped++
			h.dropped(ctx, drop)
			continue
		}
		if prev, ok := last[env.TenantID]; ok && env.Seq == prev.Seq+1 && env.PrevHash != prev.Hash {
			errs = append(errs, h.reject(ctx, rejectLink, &RecordError{Index: i, EventID: rec.EventID, Tenant: env.TenantID, Seq: env.Seq,
				Err: fmt.Errorf("%w: seq %d has prev_hash %s, seq %d in this batch has hash %s", ErrBrokenLink, env.Seq, env.PrevHash, prev.Seq, prev.Hash)}))
			continue
		}
		h.checkDeclared(ctx, i, env)
		last[env.TenantID] = env
		out = append(out, env)
	}
	if !oldest.IsZero() {
		h.recordAge(h.now().Sub(oldest))
	}
	if len(errs) > 0 {
		h.log.ErrorContext(ctx, "batch rejected: the Pipe will bisect, retry and dead-letter it",
			slog.Int(obs.KeyRecords, len(records)), slog.Int(obs.KeyRejected, len(errs)))
		return nil, fmt.Errorf("stream-filter: %d of %d records rejected: %w", len(errs), len(records), errors.Join(errs...))
	}
	h.log.InfoContext(ctx, "batch enriched", slog.Int(obs.KeyRecords, len(records)),
		slog.Int(obs.KeyEnvelopes, len(out)), slog.Int(obs.KeyDropped, dropped))
	return out, nil
}

// drop describes a record that is dropped, not failed.
type drop struct {
	index      int
	eventID    string
	eventName  string
	tenant     string
	seq        int64
	reason     string
	msg        string
	lastSeq    int64 // head rows
	lastEvent  string
	streamSeqn string
}

// record classifies one decoded record: an envelope to pass on, a drop, or
// an error that fails the batch.
func (h *Handler) record(i int, rec events.DynamoDBEventRecord) (envelope.Envelope, *drop, error) {
	tenant, seq := keyOf(rec.Change.Keys)
	fail := func(err error) (envelope.Envelope, *drop, error) {
		return envelope.Envelope{}, nil, &RecordError{Index: i, EventID: rec.EventID, Tenant: tenant, Seq: seq, Err: err}
	}
	d := &drop{index: i, eventID: rec.EventID, eventName: rec.EventName, tenant: tenant, seq: seq, streamSeqn: rec.Change.SequenceNumber}
	switch rec.EventName {
	case "REMOVE":
		d.reason = DropRemove
		if kindOf(rec.Change.OldImage) == keys.KindEvent {
			d.msg = "event row deleted from the insert-only log: dropped; run reconcile for this tenant"
		} else {
			d.msg = "REMOVE record dropped (the Pipe filter should have removed it)"
		}
		return envelope.Envelope{}, d, nil
	case "INSERT", "MODIFY":
	default:
		return fail(fmt.Errorf("%w: eventName %q is not INSERT, MODIFY or REMOVE", ErrUndecodable, rec.EventName))
	}
	img := rec.Change.NewImage
	if img == nil {
		return fail(fmt.Errorf("%w: %s record without NewImage (the stream must be NEW_AND_OLD_IMAGES)", ErrUndecodable, rec.EventName))
	}
	switch kind := kindOf(img); kind {
	case keys.KindHead:
		if err := checkStamps(img); err != nil {
			return fail(err)
		}
		d.reason = DropHeadRow
		d.msg = "head row dropped (the Pipe filter should have removed it; its stamps keep it harmless)"
		d.lastSeq, _ = number(img[keys.AttrLastSeq])
		d.lastEvent = stringOf(img[keys.AttrLastEventID])
		return envelope.Envelope{}, d, nil
	case keys.KindIdempotency:
		// An emit's idempotency-key row, written in its transaction: never an event.
		d.reason = DropIdempotencyRow
		d.msg = "idempotency-key row dropped (the Pipe filter should have removed it)"
		return envelope.Envelope{}, d, nil
	case keys.KindEvent:
	default:
		return fail(fmt.Errorf("%w: %s is %q, want %q, %q or %q", ErrUndecodable, keys.AttrKind, kind, keys.KindEvent, keys.KindHead, keys.KindIdempotency))
	}
	if rec.EventName == "MODIFY" {
		d.reason = DropModify
		d.msg = "event row modified in place (the log is insert-only): dropped; run reconcile for this tenant"
		return envelope.Envelope{}, d, nil
	}
	env, err := envelope.FromStreamImage(img)
	if err != nil {
		return fail(fmt.Errorf("%w: %v", ErrUndecodable, err))
	}
	tenant, seq = env.TenantID, env.Seq
	if err := chain.CheckStored(&env); err != nil {
		var ie *chain.IntegrityError
		if errors.As(err, &ie) && ie.Reason == chain.ReasonHashMismatch {
			return fail(fmt.Errorf("%w: %w", ErrHashMismatch, err))
		}
		return fail(fmt.Errorf("%w: %w", ErrUndecodable, err))
	}
	return env, nil, nil
}

// checkDeclared makes an event this build does not declare loud: its type,
// or its schema version, is unknown here (a producer deployed first). It is
// passed on all the same (see the package doc, "Deploy in any order").
func (h *Handler) checkDeclared(ctx context.Context, i int, env envelope.Envelope) {
	t, _, ok := h.cat.Type(env.Type)
	reason := ""
	switch {
	case !ok:
		reason = "type declared by no module of this build"
	default:
		if _, ok := t.Version(env.SchemaVersion); ok {
			return
		}
		reason = fmt.Sprintf("schema version not declared by this build (declared: %v)", versions(t))
	}
	h.log.WarnContext(ctx, "event of a type or schema version this build does not declare passed on; its integrity is checked, and subscriptions that cannot read it dead-letter it alone: deploy the backbone with the producer's catalog, then dlq-repair replays them",
		slog.String(obs.KeyEventType, env.Type), slog.Int(obs.KeySchemaVersion, env.SchemaVersion), slog.String(obs.KeyReason, reason),
		slog.Int(obs.KeyRecord, i), slog.String(obs.KeyTenant, env.TenantID), slog.Int64(obs.KeySeq, env.Seq), slog.String(obs.KeyEventID, env.ID))
	h.metrics.Count(keys.MetricUndeclaredEvents, 1, "Type", env.Type, "Version", strconv.Itoa(env.SchemaVersion))
}

// checkStamps requires the attributes the Pipe's target reads on a head row:
// the tenant (message group) and a dedup id derived from, never equal to, the
// last event id.
func checkStamps(img map[string]events.DynamoDBAttributeValue) error {
	tenant := stringOf(img[keys.AttrTenant])
	last := stringOf(img[keys.AttrLastEventID])
	dedup := stringOf(img[keys.AttrDedupID])
	switch {
	case tenant == "":
		return fmt.Errorf("%w: no %s", ErrUnstampedHead, keys.AttrTenant)
	case last == "":
		return fmt.Errorf("%w: no %s", ErrUnstampedHead, keys.AttrLastEventID)
	case dedup == "":
		return fmt.Errorf("%w: no %s; without it a head row that passes a missing filter would reach the FIFO queue", ErrUnstampedHead, keys.AttrDedupID)
	case dedup == last:
		return fmt.Errorf("%w: %s equals the event id %q; SQS would drop the event as a duplicate of its head row", ErrUnstampedHead, keys.AttrDedupID, last)
	case dedup != eventstore.HeadDedupID(last):
		return fmt.Errorf("%w: %s %q, want %q", ErrUnstampedHead, keys.AttrDedupID, dedup, eventstore.HeadDedupID(last))
	}
	return nil
}

func (h *Handler) dropped(ctx context.Context, d *drop) {
	attrs := []any{
		slog.String(obs.KeyReason, d.reason), slog.Int(obs.KeyRecord, d.index), slog.String(obs.KeyStreamEventID, d.eventID),
		slog.String(obs.KeyStreamEventName, d.eventName), slog.String(obs.KeyTenant, d.tenant), slog.Int64(obs.KeySeq, d.seq),
		slog.String(obs.KeyStreamSeq, d.streamSeqn),
	}
	if d.reason == DropHeadRow {
		attrs = append(attrs, slog.Int64(obs.KeyLastSeq, d.lastSeq), slog.String(obs.KeyLastEventID, d.lastEvent))
	}
	h.log.WarnContext(ctx, d.msg, attrs...)
	h.metrics.Count(keys.MetricDroppedRows, 1, "Reason", d.reason)
}

func (h *Handler) reject(ctx context.Context, reason string, err error) error {
	var re *RecordError
	attrs := []any{slog.String(obs.KeyReason, reason), obs.Err(err)}
	if errors.As(err, &re) {
		attrs = append(attrs, slog.Int(obs.KeyRecord, re.Index), slog.String(obs.KeyStreamEventID, re.EventID),
			slog.String(obs.KeyTenant, re.Tenant), slog.Int64(obs.KeySeq, re.Seq))
	}
	h.log.ErrorContext(ctx, "stream record rejected", attrs...)
	h.metrics.Count(keys.MetricRejectedRecords, 1, "Reason", reason)
	return err
}

// recordAge emits keys.MetricPipeRecordAge: how far behind the stream the
// Pipe is (Pipes publish no IteratorAge).
func (h *Handler) recordAge(age time.Duration) {
	if age < 0 {
		age = 0
	}
	h.metrics.Milliseconds(keys.MetricPipeRecordAge, age, obs.KeyFunction, keys.FnStreamFilter)
}

func reason(err error) string {
	switch {
	case errors.Is(err, ErrHashMismatch):
		return rejectHash
	case errors.Is(err, ErrBrokenLink):
		return rejectLink
	case errors.Is(err, ErrUnstampedHead):
		return rejectUnstamped
	default:
		return rejectUndecodable
	}
}

// LogServed logs, at start-up, what this enrichment passes on: every
// declared event type with its schema versions.
func LogServed(ctx context.Context, log *slog.Logger, cat *catalog.Catalog) {
	served := make([]string, 0)
	for _, name := range cat.TypeNames() {
		t, module, _ := cat.Type(name)
		served = append(served, fmt.Sprintf("%s v%v (%s)", name, versions(t), module))
	}
	log.InfoContext(ctx, "stream-filter serving: event rows pass when their hash and chain link check out; these types and schema versions are declared, any other passes with a warning (UndeclaredEvents)",
		slog.String(obs.KeyFunction, keys.FnStreamFilter), slog.Int(obs.KeyCount, len(served)), slog.Any(obs.KeyTypes, served))
}

func versions(t catalog.EventType) []int {
	out := make([]int, len(t.Versions))
	for i, v := range t.Versions {
		out[i] = v.Schema
	}
	return out
}

func keyOf(k map[string]events.DynamoDBAttributeValue) (string, int64) {
	seq, ok := number(k[keys.AttrSeq])
	if !ok {
		seq = -1
	}
	return stringOf(k[keys.AttrTenant]), seq
}

func kindOf(img map[string]events.DynamoDBAttributeValue) string {
	return stringOf(img[keys.AttrKind])
}

func stringOf(v events.DynamoDBAttributeValue) string {
	if v.DataType() != events.DataTypeString {
		return ""
	}
	return v.String()
}

func number(v events.DynamoDBAttributeValue) (int64, bool) {
	if v.DataType() != events.DataTypeNumber {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Number(), 10, 64)
	return n, err == nil
}
