package changefeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// ErrUntracked: a record comes from a table this feed does not track. It is
// a wiring mistake (the mapping's source, or the table's environment
// variable), so the record fails loudly instead of being skipped.
var ErrUntracked = errors.New("record from a table the change feed does not track")

// DynamoDB is the part of the DynamoDB API the feed uses.
type DynamoDB interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Dispatcher dispatches a change event on the BEST_EFFORT lane
// (lanes.BestEffort), given a context the feed bound to it with
// lanes.HandlerContext.
type Dispatcher interface {
	DispatchBound(hctx context.Context, e envelope.Envelope) error
}

var _ Dispatcher = (*lanes.BestEffort)(nil)

// Config configures a Feed.
type Config struct {
	DB    DynamoDB // required
	Table string   // the change-feed table; required
	// Tables maps each tracked table's name to its entity. Empty for an
	// application that tracks no table (dlq-repair builds a feed all the
	// same): every record is then untracked (ErrUntracked).
	Tables     map[string]catalog.Entity
	Dispatcher Dispatcher // required
	Logger     *slog.Logger
	Metrics    *obs.Metrics
	// Retention is how long a change-feed row is kept after the change
	// (default 7 days).
	Retention time.Duration
	// Attempts is how many times a failing dispatch is tried before the
	// record fails (default 3); Backoff the first pause, doubling (default 50 ms).
	Attempts int
	Backoff  time.Duration
}

// Feed records and dispatches change events. It is safe for concurrent use.
type Feed struct{ cfg Config }

// New returns a Feed.
func New(cfg Config) (*Feed, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("changefeed: Config.DB is nil")
	case cfg.Table == "":
		return nil, errors.New("changefeed: Config.Table (the change-feed table) is empty")
	case cfg.Dispatcher == nil:
		return nil, errors.New("changefeed: Config.Dispatcher is nil; use lanes.NewBestEffort")
	}
	for table, ent := range cfg.Tables {
		if table == "" || !catalog.ValidEntity(ent.Name) {
			return nil, fmt.Errorf("changefeed: tracked table %q → entity %q: both must be set", table, ent.Name)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 50 * time.Millisecond
	}
	return &Feed{cfg: cfg}, nil
}

// TablesFromEnv maps each entity's table, named by its TableEnv variable
// read with getenv, to the entity. An entity whose variable is unset is an
// error: its changes would never be fed.
func TablesFromEnv(ents []catalog.Entity, getenv func(string) string) (map[string]catalog.Entity, error) {
	out := map[string]catalog.Entity{}
	var missing []string
	for _, e := range ents {
		t := getenv(e.TableEnv)
		if t == "" {
			missing = append(missing, e.TableEnv+" ("+e.Name+")")
			continue
		}
		out[t] = e
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("changefeed: tracked entities without a table: %v", missing)
	}
	return out, nil
}

// RequireEnv reads a change-feed function's environment: names, which must
// all be set, and the table variable of every tracked entity, without which
// that entity's changes would never be fed. It returns the values and the
// tracked tables (see TablesFromEnv); a missing variable is an
// *awsenv.MissingEnvError naming every one.
func RequireEnv(ents []catalog.Entity, names ...string) (map[string]string, map[string]catalog.Entity, error) {
	names = slices.Clone(names)
	for _, e := range ents {
		names = append(names, e.TableEnv)
	}
	env, err := awsenv.Require(names...)
	if err != nil {
		return nil, nil, err
	}
	tables, err := TablesFromEnv(ents, func(n string) string { return env[n] })
	if err != nil {
		return nil, nil, err
	}
	return env, tables, nil
}

// Entity returns the entity tracked in table.
func (f *Feed) Entity(table string) (catalog.Entity, bool) {
	e, ok := f.cfg.Tables[table]
	return e, ok
}

// Apply turns one stream record into a change event, writes its row and
// dispatches it. A *RejectError means the record was logged, counted and
// skipped (do not retry); any other error means retry the record.
func (f *Feed) Apply(ctx context.Context, r Record) (Change, error) {
	ent, ok := f.cfg.Tables[r.Table()]
	if !ok {
		return Change{Source: r}, fmt.Errorf("record %s from %s: %w", r.EventID, r.StreamARN, ErrUntracked)
	}
	c, err := Build(ent, r)
	if err != nil {
		var rej *RejectError
		if errors.As(err, &rej) {
			f.cfg.Logger.ErrorContext(ctx, "stream record is not a change event; skipped (retrying cannot fix it)",
				slog.String(obs.KeyStreamEventID, r.EventID), slog.String(obs.KeyStreamSeq, r.SequenceNumber), slog.String(obs.KeyStreamARN, r.StreamARN),
				slog.String(obs.KeyStreamEventName, r.EventName), slog.String(obs.KeyReason, rej.Reason), obs.Err(err))
			f.cfg.Metrics.Count(keys.MetricChangeRejected, 1, "Reason", rej.Reason)
		}
		return c, err
	}
	return c, f.Record(ctx, c)
}

// Record writes a built change event's row and dispatches it.
func (f *Feed) Record(ctx context.Context, c Change) error {
	ctx, err := lanes.HandlerContext(ctx, c.Envelope, catalog.BestEffort)
	if err != nil {
		return err
	}
	log := f.cfg.Logger.With(slog.String(obs.KeyEventType, c.Envelope.Type), slog.String(obs.KeyEntityID, c.Payload.ID),
		slog.Int64(obs.KeyVersion, c.Payload.Version), slog.String(obs.KeyStreamSeq, c.Source.SequenceNumber))
	if c.NameUnknown {
		log.WarnContext(ctx, "stream record with an event name the SDK does not know; classified by its images",
			slog.String(obs.KeyStreamEventName, c.Source.EventName), slog.Bool(obs.KeyDeleted, c.Deleted), slog.String(obs.KeyCause, c.Cause))
	}
	if c.VersionUnchanged {
		log.WarnContext(ctx, "MODIFY without a new version: projections that apply by version will skip it; bump the version with every write")
	}
	if err := f.put(ctx, c); err != nil {
		return err
	}
	if err := f.dispatch(ctx, log, c.Envelope); err != nil {
		return err
	}
	op := keys.ChangeOpWritten
	if c.Deleted {
		op = keys.ChangeOpDeleted
	}
	f.cfg.Metrics.Count(keys.MetricChangeEvents, 1, "Entity", c.Entity.Name, "Op", op)
	log.DebugContext(ctx, "change event recorded and dispatched", slog.String(obs.KeyCause, c.Cause))
	return nil
}

// SortKey is the change-feed row's sort key:
// <ENTITY>#<id>#<version, 20 digits>#<stream event id>.
func SortKey(c Change) string {
	return c.Entity.Name + keys.ChangeSKSep + c.Payload.ID + keys.ChangeSKSep + fmt.Sprintf("%020d", c.Payload.Version) + keys.ChangeSKSep + c.Source.EventID
}

func (f *Feed) put(ctx context.Context, c Change) error {
	e := c.Envelope
	payload, err := envelope.ToAttributeValue("payload", e.Payload)
	if err != nil {
		return fmt.Errorf("change-feed row of %s: %w", e.ID, err)
	}
	op := keys.ChangeOpWritten
	if c.Deleted {
		op = keys.ChangeOpDeleted
	}
	when, _ := time.Parse(time.RFC3339Nano, e.OccurredAt)
	item := map[string]types.AttributeValue{
		keys.AttrPK:            sv(e.TenantID),
		keys.AttrSK:            sv(SortKey(c)),
		keys.AttrID:            sv(e.ID),
		keys.AttrType:          sv(e.Type),
		keys.AttrTenant:        sv(e.TenantID),
		keys.AttrOccurredAt:    sv(e.OccurredAt),
		keys.AttrSchemaVersion: nv(int64(e.SchemaVersion)),
		keys.AttrPayload:       payload,
		keys.AttrEntity:        sv(c.Entity.Name),
		keys.AttrEntityID:      sv(c.Payload.ID),
		keys.AttrVersion:       nv(c.Payload.Version),
		keys.AttrChangeOp:      sv(op),
		keys.AttrCause:         sv(c.Cause),
		keys.AttrStreamEventID: sv(c.Source.EventID),
		keys.AttrExpiresAt:     nv(when.Add(f.cfg.Retention).Unix()),
	}
	if c.Source.SequenceNumber != "" {
		item[keys.AttrStreamSeq] = sv(c.Source.SequenceNumber)
	}
	if c.Source.StreamARN != "" {
		item[keys.AttrStreamARN] = sv(c.Source.StreamARN)
	}
	// Unconditional: the key names the record, so a retry rewrites the same row.
	if _, err := f.cfg.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.cfg.Table), Item: item}); err != nil {
		return fmt.Errorf("write change-feed row of %s %s v%d: %w", c.Entity.Name, c.Payload.ID, c.Payload.Version, err)
	}
	return nil
}

// dispatch runs the BEST_EFFORT subscriptions, retrying the event (every
// matching subscription; they are duplicate-tolerant) a few times with
// backoff while any fails. ctx is bound to e (Record).
func (f *Feed) dispatch(ctx context.Context, log *slog.Logger, e envelope.Envelope) error {
	final := func(err error) bool {
		return errors.Is(err, lanes.ErrNotChangeEvent) || errors.Is(err, tenancy.ErrNoTenant)
	}
	retry := lanes.Retry{Attempts: f.cfg.Attempts, Backoff: f.cfg.Backoff, Final: final,
		OnRetry: func(ctx context.Context, attempt int, err error) {
			log.WarnContext(ctx, "BEST_EFFORT dispatch failed; retrying", slog.Int(obs.KeyAttempt, attempt), obs.Err(err))
		}}
	runs := 0
	err := lanes.Retrying(retry)(lanes.Counted(&runs)(f.cfg.Dispatcher.DispatchBound))(ctx, e)
	switch {
	case err == nil:
		return nil
	case runs < f.cfg.Attempts && !final(err): // the context ended during a pause
		return fmt.Errorf("dispatch %s: %w", e.ID, err)
	}
	return fmt.Errorf("dispatch %s after %d attempts: %w", e.ID, runs, err)
}

func sv(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func nv(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// TableSchema is the change-feed table as infra/ deploys it (pk, sk; TTL on
// keys.AttrExpiresAt, which CreateTable cannot set: call UpdateTimeToLive),
// for tests and local runs that create the table themselves.
func TableSchema(name string) *dynamodb.CreateTableInput {
	return keys.PKSKTable(name)
}
