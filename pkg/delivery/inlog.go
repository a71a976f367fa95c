package delivery

// Only events in the log are delivered. The queue's policy lets only the
// Pipe and dlq-repair send to it, and Deliver (with Config.Log) checks each
// envelope against the log's row at its (tenant, seq): same id, same hash.
// An envelope whose own hash matches its own content proves nothing by
// itself: anyone can compute it.
//
// The check is folded into the claim prefetch: the same BatchGetItem that
// reads a batch's claims from the state table reads the batch's event rows
// from the events table (id and hash only), eventually consistent. A row
// read there is final (the log is insert-only), so a hash that differs is
// refused at once; a row the read did not return may just be too fresh for
// an eventually consistent read, so it is read again, strongly consistent,
// before the envelope is refused. Measured in inlog_test.go
// (TestInLogCheckCost).

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// ErrNotInLog: an envelope is not in the log (NotInLogError has the detail).
var ErrNotInLog = errors.New("event is not in the log")

// NotInLogError says how an envelope differs from the log.
type NotInLogError struct {
	Tenant  string
	Seq     int64
	EventID string
	Reason  string // "no event at this seq", or how the row differs
}

func (e *NotInLogError) Error() string {
	return fmt.Sprintf("tenant %s seq %d event %s: %v: %s", e.Tenant, e.Seq, e.EventID, ErrNotInLog, e.Reason)
}

// Unwrap makes errors.Is(err, ErrNotInLog) hold.
func (e *NotInLogError) Unwrap() error { return ErrNotInLog }

// EventRef locates an event in the log.
type EventRef struct {
	Tenant string
	Seq    int64
}

// LoggedEvent is what the log holds at an EventRef.
type LoggedEvent struct {
	ID   string
	Hash string
}

// LogReader reads one event row of the log, strongly consistent.
type LogReader interface {
	LoggedEvent(ctx context.Context, ref EventRef) (LoggedEvent, bool, error)
}

// WithLog makes the store also read the events table named table: the
// prefetch then reads the batch's event rows with its claims, and the store
// is a LogReader for Config.Log.
func (d *DynamoStore) WithLog(table string) *DynamoStore {
	c := *d
	c.log = table
	return &c
}

var _ LogReader = (*DynamoStore)(nil)

func eventKey(ref EventRef) map[string]av {
	return map[string]av{keys.AttrTenant: s(ref.Tenant), keys.AttrSeq: n(ref.Seq)}
}

// LoggedEvent reads the event row at ref (id and hash), strongly consistent.
func (d *DynamoStore) LoggedEvent(ctx context.Context, ref EventRef) (LoggedEvent, bool, error) {
	if d.log == "" {
		return LoggedEvent{}, false, errors.New("delivery store has no events table (DynamoStore.WithLog)")
	}
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.log), Key: eventKey(ref), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#id, #h, #k"),
		ExpressionAttributeNames: map[string]string{"#id": keys.AttrID, "#h": keys.AttrHash, "#k": keys.AttrKind},
	})
	if err != nil {
		return LoggedEvent{}, false, fmt.Errorf("read the log at %s/%d: %w", ref.Tenant, ref.Seq, err)
	}
	if out.Item == nil || str(out.Item, keys.AttrKind) != keys.KindEvent {
		return LoggedEvent{}, false, nil
	}
	return LoggedEvent{ID: str(out.Item, keys.AttrID), Hash: str(out.Item, keys.AttrHash)}, true, nil
}

// checkInLog refuses e unless the log holds it (see the note at the top).
func (d *Deliverer) checkInLog(ctx context.Context, e envelope.Envelope, p *Prefetched) error {
	if d.cfg.Log == nil {
		return nil
	}
	ref := EventRef{Tenant: e.TenantID, Seq: e.Seq}
	got, found := p.loggedEvent(ref)
	if !found {
		var err error
		if got, found, err = d.cfg.Log.LoggedEvent(ctx, ref); err != nil {
			return fmt.Errorf("deliver %s: check it is in the log: %w", e.ID, err)
		}
	}
	refuse := func(why string) error {
		d.cfg.Metrics.Count(keys.MetricNotInLog, 1)
		return &NotInLogError{Tenant: e.TenantID, Seq: e.Seq, EventID: e.ID, Reason: why}
	}
	switch {
	case !found:
		return refuse("the log has no event at this seq")
	case got.ID != e.ID:
		return refuse(fmt.Sprintf("the log's event at this seq is %s", got.ID))
	case got.Hash != e.Hash:
		return refuse(fmt.Sprintf("the log's hash is %s, the envelope's %s", got.Hash, e.Hash))
	}
	return nil
}
