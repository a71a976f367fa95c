// Package consumer is the durable consumer's logic: an SQS FIFO batch (one
// message group per tenant, each body an envelope from stream-filter) goes
// through delivery.Deliverer.DeliverWith, and the messages that must come back are
// answered as batchItemFailures.
//
// FIFO order is per tenant, so a message that must come back takes every
// later message of its tenant in the batch with it (they are not attempted);
// other tenants go on. A message must come back when:
//
//   - Deliver fails on infrastructure (DynamoDB throttling, a timeout);
//   - another delivery holds a claim's lease (RetryLater);
//   - its body is not a valid, hash-intact envelope of the message's group
//     and the consumer has no DLQ to move it to (Config.DeadLetters): it is
//     never deleted unread; after maxReceiveCount the queue's redrive moves
//     it to the FIFO DLQ, where dlq-repair re-reads the log;
//   - its envelope is not in the log (delivery.ErrNotInLog: no event at its
//     seq, or one with another id or hash). Nothing is delivered and no
//     claim is taken. It is logged at ERROR and counted (NotInLog), and
//     answered as a failure so the redrive moves it to the FIFO DLQ: there
//     the DLQ depth alarm pages, and dlq-repair, which re-reads the log,
//     reports it open on every run and keeps it parked, so an operator sees
//     it and decides. Dropping it would leave only a log line. It does not
//     hold back the tenant's later messages in the batch: it is not one of
//     the tenant's events, so FIFO order does not involve it.
//
// With Config.DeadLetters, an undecodable message (a poison: no receive can
// make it decodable) is dead-lettered at its first receive instead: sent to
// the FIFO DLQ as it came, with the reason in its message attributes
// (AttrDeadLetterReason, AttrDeadLetterError), logged at ERROR and counted
// (DurableMessageDeadLettered), then answered as done, so SQS deletes it. It
// does not hold back its tenant's later messages: it names no event of the
// tenant that FIFO order could involve, and a gap it hides keeps the
// tenant's watermark where it is until dlq-repair redelivers from the log.
// Were it left to the redrive, it would hold its tenant's lane for
// maxReceiveCount visibility timeouts. If the send fails, the message comes
// back as above.
//
// A handler that fails does not fail the message: Deliver dead-letters that
// subscription and its siblings run.
//
// The consumer writes no delivery watermark: an event costs its claim and
// its N completions (1 + N writes), whatever the batch's shape. The
// watermark is derived from the claims by whoever reads it (reconcile,
// dlq-repair: delivery.WatermarkReader), and they write its checkpoint.
//
// The later messages of a tenant that come back with a failed one count a
// receive each time, so when a poison message reaches the DLQ those behind it
// usually reach it too; dlq-repair redelivers them from the log.
package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// SQS system attributes of a FIFO message, as Lambda passes them.
const (
	attrGroupID = "MessageGroupId"
	attrDedupID = "MessageDeduplicationId"
	attrCount   = "ApproximateReceiveCount"
)

// Reasons a message is answered as a batch item failure (log field reason
// and the Reason dimension of keys.MetricDurableMessageFailed).
const (
	ReasonInfrastructure = "infrastructure" // Deliver returned an error
	ReasonRetryLater     = "retry_later"    // a claim is held by another delivery's lease
	ReasonUndecodable    = "undecodable"    // the body is not a valid envelope of this group
	ReasonBehindFailure  = "behind_failure" // an earlier message of the tenant failed
	ReasonNoTime         = "no_time"        // the invocation ran out of time before it started
	ReasonNotInLog       = "not_in_log"     // the envelope is not the log's event at its seq
	ReasonNotCovered     = "not_covered"    // the event is in the log, but its chain does not cover it
)

// ErrUndecodable wraps every reason a body is not a deliverable envelope.
var ErrUndecodable = errors.New("message body is not a deliverable envelope")

// Message attributes of a message the consumer dead-letters itself.
const (
	// AttrDeadLetterReason is the reason (ReasonUndecodable).
	AttrDeadLetterReason = "fourlanes.reason"
	// AttrDeadLetterError is the decode error, at most maxAttrError bytes.
	AttrDeadLetterError = "fourlanes.error"
	// AttrDeadLetterReceives is the message's ApproximateReceiveCount.
	AttrDeadLetterReceives = "fourlanes.receive_count"
)

const maxAttrError = 1024

// DeadLetterSender is the part of the SQS API that dead-letters a message.
type DeadLetterSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Deliverer is the part of *delivery.Deliverer the consumer uses.
type Deliverer interface {
	DeliverWith(ctx context.Context, e envelope.Envelope, p *delivery.Prefetched) (delivery.Result, error)
	Prefetch(ctx context.Context, envs []envelope.Envelope) (*delivery.Prefetched, delivery.PrefetchStats, error)
}

var _ Deliverer = (*delivery.Deliverer)(nil)

// Flusher finishes work started in the background during an invocation:
// lanes.InProcess, when DURABLE handlers emit events whose LOCAL handlers
// must finish before the invocation returns.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Config configures a Handler.
type Config struct {
	Deliverer Deliverer // required
	// Registry, when set, is used at construction to log the DURABLE
	// subscriptions served and to refuse to start if one declared on
	// DURABLE is not bound here (it would silently never run).
	Registry *catalog.Registry
	Flusher  Flusher // optional; see Flusher
	// DeadLetters and DeadLetterQueue (the FIFO DLQ's URL) move an
	// undecodable message to the DLQ at its first receive (see the package
	// doc). Without them it stays in the queue until the redrive moves it.
	DeadLetters     DeadLetterSender
	DeadLetterQueue string
	Logger          *slog.Logger
	Metrics         *obs.Metrics
	// Reserve is the time kept back from the invocation's deadline for
	// flushing and answering (default 2 s). A message not started by then
	// comes back.
	Reserve time.Duration
}

// Handler handles SQS FIFO batches. It is safe for concurrent use.
type Handler struct{ cfg Config }

// New returns a Handler. With cfg.Registry it logs the DURABLE
// subscriptions served and fails if any declared one is unbound.
func New(ctx context.Context, cfg Config) (*Handler, error) {
	if cfg.Deliverer == nil {
		return nil, errors.New("consumer: Config.Deliverer is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Reserve <= 0 {
		cfg.Reserve = 2 * time.Second
	}
	if (cfg.DeadLetters == nil) != (cfg.DeadLetterQueue == "") {
		return nil, errors.New("consumer: Config.DeadLetters and Config.DeadLetterQueue go together: pass both (an SQS client and the FIFO DLQ's URL) or neither")
	}
	if cfg.Registry != nil {
		if err := cfg.Registry.LogServed(ctx, cfg.Logger, catalog.Durable); err != nil {
			return nil, fmt.Errorf("consumer: %w", err)
		}
	}
	return &Handler{cfg: cfg}, nil
}

// message is one SQS message as the consumer sees it.
type message struct {
	idx   int
	raw   events.SQSMessage
	group string
	env   envelope.Envelope
	err   error // decode error: the message is poison
}

// outcome is what happened to one message.
type outcome struct {
	failed bool
	reason string
}

// Handle delivers a batch and answers which messages must come back. It
// returns an error only for a batch it cannot read at all, never for a
// message (those are batchItemFailures).
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	ctx = obs.WithLane(ctx, string(catalog.Durable))
	log := h.cfg.Logger
	msgs := make([]*message, len(ev.Records))
	var envs []envelope.Envelope
	for i, r := range ev.Records {
		m := &message{idx: i, raw: r, group: r.Attributes[attrGroupID]}
		m.env, m.err = DecodeMessage(r)
		if m.group == "" {
			// Not from a FIFO queue, or a test: fall back on the envelope's
			// tenant; an undecodable one is its own group.
			m.group = m.env.TenantID
			if m.group == "" {
				m.group = "\x00" + r.MessageId
			}
		}
		if m.err == nil {
			envs = append(envs, m.env)
		}
		msgs[i] = m
	}

	dctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, dl.Add(-h.cfg.Reserve))
		defer cancel()
	}
	pre, st, err := h.cfg.Deliverer.Prefetch(dctx, envs)
	if err != nil {
		log.WarnContext(ctx, "claim prefetch failed; claiming each subscription", obs.Err(err))
	}
	log.InfoContext(ctx, "batch received", slog.Int(obs.KeyCount, len(msgs)), slog.Int(obs.KeyClaimsPrefetched, st.Keys), slog.Int(obs.KeyClaimsFinal, st.Final),
		slog.Int(obs.KeyEventsPrefetched, st.Events), slog.Int(obs.KeyEventsInLog, st.Logged))

	// Tenants in parallel, each tenant's messages in queue order.
	var order []string
	groups := map[string][]*message{}
	for _, m := range msgs {
		if _, ok := groups[m.group]; !ok {
			order = append(order, m.group)
		}
		groups[m.group] = append(groups[m.group], m)
	}
	outs := make([]outcome, len(msgs))
	var wg sync.WaitGroup
	for _, g := range order {
		wg.Go(func() { h.tenant(ctx, dctx, pre, groups[g], outs) })
	}
	wg.Wait()

	if h.cfg.Flusher != nil {
		if err := h.cfg.Flusher.Flush(ctx); err != nil {
			log.ErrorContext(ctx, "LOCAL handlers still running when the invocation ends", obs.Err(err))
		}
	}

	var resp events.SQSEventResponse
	failed := map[string]int{}
	for i, o := range outs {
		if o.failed {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msgs[i].raw.MessageId})
			failed[o.reason]++
		}
	}
	for reason, n := range failed {
		h.cfg.Metrics.Count(keys.MetricDurableMessageFailed, n, "Reason", reason)
	}
	log.InfoContext(ctx, "batch done", slog.Int(obs.KeyCount, len(msgs)), slog.Int(obs.KeyFailed, len(resp.BatchItemFailures)),
		slog.Int(obs.KeyClaimsSkipped, pre.Skipped()))
	return resp, nil
}

// tenant delivers one tenant's messages in order until one fails; that one
// and every later one come back. pre is the batch's prefetch.
func (h *Handler) tenant(ctx, dctx context.Context, pre *delivery.Prefetched, ms []*message, outs []outcome) {
	log := h.cfg.Logger
	blocked := ""
	for _, m := range ms {
		mctx := ctx
		if m.err == nil {
			mctx = obs.WithEvent(tenancy.MustWithChain(ctx, m.env.TenantID), m.env.ID)
		}
		attrs := []any{slog.String(obs.KeyMessageID, m.raw.MessageId), slog.String(obs.KeyGroup, m.group), slog.String(obs.KeyReceiveCount, m.raw.Attributes[attrCount])}
		if blocked != "" {
			outs[m.idx] = outcome{failed: true, reason: ReasonBehindFailure}
			log.WarnContext(mctx, "not attempted: an earlier message of this tenant must come back first (FIFO order)", append(attrs, slog.String(obs.KeyReason, ReasonBehindFailure), slog.String(obs.KeyBlockedBy, blocked))...)
			continue
		}
		if m.err != nil {
			attrs = append(attrs, slog.String(obs.KeyReason, ReasonUndecodable), obs.Err(m.err), slog.String(obs.KeyBodyPrefix, prefix(m.raw.Body, 256)))
			if h.cfg.DeadLetters == nil {
				outs[m.idx] = outcome{failed: true, reason: ReasonUndecodable}
				blocked = m.raw.MessageId
				log.ErrorContext(mctx, "undecodable message: not deleted; it comes back and, after maxReceiveCount, moves to the FIFO DLQ for dlq-repair", attrs...)
				continue
			}
			if err := h.deadLetter(ctx, m, ReasonUndecodable, m.err); err != nil {
				outs[m.idx] = outcome{failed: true, reason: ReasonUndecodable}
				blocked = m.raw.MessageId
				log.ErrorContext(mctx, "undecodable message: the move to the FIFO DLQ failed; it comes back, and after maxReceiveCount the redrive moves it",
					append(attrs, obs.ErrAt(obs.KeyDLQError, err))...)
				continue
			}
			h.cfg.Metrics.Count(keys.MetricDurableMessageDeadLettered, 1, "Reason", ReasonUndecodable)
			log.ErrorContext(mctx, "undecodable message: dead-lettered at this receive to the FIFO DLQ, with its reason, for dlq-repair; the tenant's later messages go on", attrs...)
			continue
		}
		if dctx.Err() != nil {
			outs[m.idx] = outcome{failed: true, reason: ReasonNoTime}
			blocked = m.raw.MessageId
			log.WarnContext(mctx, "invocation out of time before this message started; it comes back", attrs...)
			continue
		}
		res, err := h.cfg.Deliverer.DeliverWith(dctx, m.env, pre) // it binds the envelope
		attrs = append(attrs, slog.String(obs.KeyEventType, m.env.Type), slog.Int64(obs.KeySeq, m.env.Seq), slog.String(obs.KeySubscriptions, summary(res)))
		switch {
		case errors.Is(err, delivery.ErrNotInLog):
			// Not blocked: it is not one of the tenant's events.
			outs[m.idx] = outcome{failed: true, reason: ReasonNotInLog}
			log.ErrorContext(mctx, "envelope is not in the log: not delivered; it comes back and, after maxReceiveCount, moves to the FIFO DLQ, where dlq-repair reports it open",
				append(attrs, slog.String(obs.KeyReason, ReasonNotInLog), obs.Err(err), slog.String(obs.KeyDedupID, m.raw.Attributes[attrDedupID]))...)
		case errors.Is(err, delivery.ErrNotCovered):
			// Not blocked, as above. Permanent: dead-lettered now when the
			// consumer has the DLQ, so that it never waits out the redrive.
			attrs = append(attrs, slog.String(obs.KeyReason, ReasonNotCovered), obs.Err(err))
			if h.cfg.DeadLetters != nil {
				derr := h.deadLetter(ctx, m, ReasonNotCovered, err)
				if derr == nil {
					h.cfg.Metrics.Count(keys.MetricDurableMessageDeadLettered, 1, "Reason", ReasonNotCovered)
					log.ErrorContext(mctx, "event not covered by its chain: not delivered; dead-lettered at this receive to the FIFO DLQ, with its reason", attrs...)
					continue
				}
				attrs = append(attrs, obs.ErrAt(obs.KeyDLQError, derr))
			}
			outs[m.idx] = outcome{failed: true, reason: ReasonNotCovered}
			log.ErrorContext(mctx, "event not covered by its chain: not delivered; it comes back and, after maxReceiveCount, moves to the FIFO DLQ, where dlq-repair reports it open", attrs...)
		case err != nil:
			outs[m.idx] = outcome{failed: true, reason: ReasonInfrastructure}
			blocked = m.raw.MessageId
			log.ErrorContext(mctx, "delivery failed on infrastructure; the message and the tenant's later ones come back",
				append(attrs, slog.String(obs.KeyReason, ReasonInfrastructure), obs.Err(err))...)
		case res.RetryLater():
			outs[m.idx] = outcome{failed: true, reason: ReasonRetryLater}
			blocked = m.raw.MessageId
			log.WarnContext(mctx, "a claim is held by another delivery; the message and the tenant's later ones come back", append(attrs, slog.String(obs.KeyReason, ReasonRetryLater))...)
		default:
			log.InfoContext(mctx, "delivered", attrs...)
		}
	}
}

// deadLetter sends m as it came to the FIFO DLQ, with why in its message
// attributes. The deduplication id is the message id, so that a second
// receive (the answer lost, the invocation cut short) within SQS's five
// minute window sends no second copy.
func (h *Handler) deadLetter(ctx context.Context, m *message, reason string, why error) error {
	group := m.group
	if strings.HasPrefix(group, "\x00") {
		group = ReasonUndecodable // no group and no tenant: one group of its own
	}
	msg := why.Error()
	if len(msg) > maxAttrError {
		msg = strings.ToValidUTF8(msg[:maxAttrError], "")
	}
	str := func(v string) sqstypes.MessageAttributeValue {
		return sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	attrs := map[string]sqstypes.MessageAttributeValue{
		AttrDeadLetterReason: str(reason),
		AttrDeadLetterError:  str(msg),
	}
	if n := m.raw.Attributes[attrCount]; n != "" {
		attrs[AttrDeadLetterReceives] = sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(n)}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := h.cfg.DeadLetters.SendMessage(sctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(h.cfg.DeadLetterQueue), MessageBody: aws.String(m.raw.Body),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(m.raw.MessageId),
		MessageAttributes: attrs,
	})
	if err != nil {
		return fmt.Errorf("dead-letter message %s: %w", m.raw.MessageId, err)
	}
	return nil
}

func summary(res delivery.Result) string {
	var b bytes.Buffer
	for i, s := range res.Subscriptions {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.Subscription + "=" + string(s.Outcome))
	}
	return b.String()
}

func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// DecodeMessage decodes an SQS message body into the envelope stream-filter
// wrote: strict JSON (no unknown fields), a stored event (seq, prev_hash,
// hash), a hash that matches its canonical bytes, and, on a FIFO message, a
// tenant equal to the message group and an id equal to the deduplication id
// (or a dedup id dlq-repair gave it, keys.DedupReparkPrefix).
// Every failure wraps ErrUndecodable.
func DecodeMessage(m events.SQSMessage) (envelope.Envelope, error) {
	e, err := DecodeEnvelope([]byte(m.Body))
	if err != nil {
		return e, err
	}
	if g := m.Attributes[attrGroupID]; g != "" && g != e.TenantID {
		return e, fmt.Errorf("%w: message group %q carries an event of tenant %q (the Pipe's MessageGroupId path is wrong)", ErrUndecodable, g, e.TenantID)
	}
	if d := m.Attributes[attrDedupID]; d != "" && d != e.ID && !strings.HasPrefix(d, keys.DedupReparkPrefix) {
		return e, fmt.Errorf("%w: deduplication id %q is not the event id %q (the Pipe's MessageDeduplicationId path is wrong, or a head row reached the queue)", ErrUndecodable, d, e.ID)
	}
	return e, nil
}

// DecodeEnvelope decodes the JSON of a stored event and checks it: strict
// fields, payload numbers in canonical form, then chain.CheckStored. Every
// failure wraps ErrUndecodable; an integrity failure also wraps its
// *chain.IntegrityError.
func DecodeEnvelope(body []byte) (envelope.Envelope, error) {
	e, err := envelope.FromJSON(body)
	if err != nil {
		return e, fmt.Errorf("%w: %v", ErrUndecodable, err)
	}
	if err := chain.CheckStored(&e); err != nil {
		return e, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	return e, nil
}
