// Package restore merges a copy of the state table, restored from a backup
// or to a point in time, back into the live state table: it copies every
// row the live table lacks, of the kinds that stop a completed effect from
// being sent again, and never overwrites or deletes a live row.
//
// A row the live table lacks was deleted (by hand, by an attacker, or by an
// earlier restore pointed at the stack) or was never written there. A live
// row is always newer than its restored copy, so it stays. What is copied,
// and why (row layout in pkg/keys):
//
//   - claims (claims#<event>, and claim#<event>:<sub> of the earlier
//     layout): a completed entry is what stops a redelivery (dlq-repair's
//     unsettled walk, a redrive) from running the handler again. An event's
//     claim item holds one entry per subscription: when the live item lacks
//     some of the restored item's entries, those entries (and only those)
//     are merged into it, each conditioned on the live item still lacking
//     it; an entry the live item has is never touched.
//   - effects (effect#…): an effect recorded done is not done again; one
//     started and never recorded done is redone or held for an operator
//     (pkg/effect), never silently run as if new.
//   - dead letters (dead#<tenant>): an undelivered event stays visible and
//     replayable, unless the live table shows it resolved since (its claim
//     entry says completed, or its resolution is in the history).
//   - dead-letter history (deadlog#…): who resolved what, for the audit.
//   - watermarks (watermark#<tenant>): without one, dlq-repair and reconcile
//     see every event from the subscription's start as unsettled.
//   - subscription starts (substart): a subscription keeps the start it went
//     live with, instead of recording a new one.
//   - backfill cursors (backfill#…) and quarantine rows (quarantine#…): a
//     backfill resumes where it stopped; a poison event stays set aside.
//
// Not copied, each rebuilt by its owner from something a table restore
// cannot roll back:
//
//   - reconcile checkpoints and walks (checkpoint#…): an unsigned
//     checkpoint from an older table would be trusted as verified; without
//     one, reconcile verifies the chain from genesis (or its newest signed
//     checkpoint) and writes a new one.
//   - the notary's chain state (notary#…): an older state would see the
//     records it missed as gaps; without one, the notary starts the chain
//     again from its newest signed checkpoint in the Object Lock bucket.
//   - reconcile rounds (round#…) and projection runs (projrun#…): progress
//     of a scheduled job, which starts a new round or run.
//   - parked projection changes (park#…): derived data; a projection's
//     compare repairs what a lost park left behind.
//   - undeclared-subscription rows (subretire): a copy could retire a
//     subscription that was declared again; dlq-repair records a missing one
//     on its next run (its grace period starts again: the safe direction).
//
// A row whose TTL (keys.AttrExpiresAt) has passed is not copied: DynamoDB
// would delete it again.
package restore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Kind is a kind of state-table row.
type Kind string

// Kinds that are copied.
const (
	Claims            Kind = "claims"
	Effects           Kind = "effects"
	DeadLetters       Kind = "dead_letters"
	DeadLetterHistory Kind = "dead_letter_history"
	Watermarks        Kind = "watermarks"
	Starts            Kind = "subscription_starts"
	Backfills         Kind = "backfills"
	Quarantine        Kind = "quarantine"
)

// Kinds that are not copied (see the package documentation).
const (
	Checkpoints    Kind = "checkpoints"
	NotaryState    Kind = "notary_state"
	Rounds         Kind = "reconcile_rounds"
	ProjectionRuns Kind = "projection_runs"
	Parked         Kind = "parked_changes"
	Retirements    Kind = "undeclared_subscriptions"
	// Unknown: a row of no kind this package knows (a newer layout, or not
	// the backbone's): never copied, and reported.
	Unknown Kind = "unknown"
)

// Copied lists the kinds Run copies, in report order.
var Copied = []Kind{Claims, Effects, DeadLetters, DeadLetterHistory, Watermarks, Starts, Backfills, Quarantine}

// NotCopied lists the kinds Run leaves to their owners, in report order.
var NotCopied = []Kind{Checkpoints, NotaryState, Rounds, ProjectionRuns, Parked, Retirements, Unknown}

// prefixes maps each row kind's partition-key prefix (or whole partition
// key, for the ones without a suffix) to its kind.
var prefixes = []struct {
	pk    string
	exact bool
	kind  Kind
}{
	{keys.StateEventClaimPrefix, false, Claims},
	{keys.StateClaimPrefix, false, Claims},
	{keys.StateEffectPrefix, false, Effects},
	{keys.StateDeadLogPrefix, false, DeadLetterHistory},
	{keys.StateDeadPrefix, false, DeadLetters},
	{keys.StateWatermarkPrefix, false, Watermarks},
	{keys.StateSubStartPK, true, Starts},
	{keys.StateBackfillPrefix, false, Backfills},
	{keys.StateQuarantinePrefix, false, Quarantine},
	{keys.StateCheckpointPrefix, false, Checkpoints},
	{keys.StateNotaryPrefix, false, NotaryState},
	{keys.StateRoundPrefix, false, Rounds},
	{keys.StateProjRunPrefix, false, ProjectionRuns},
	{keys.StateParkedPrefix, false, Parked},
	{keys.StateSubRetirePK, true, Retirements},
}

// KindOf is the kind of the state-table row whose partition key is pk.
func KindOf(pk string) Kind {
	for _, p := range prefixes {
		if (p.exact && pk == p.pk) || (!p.exact && strings.HasPrefix(pk, p.pk)) {
			return p.kind
		}
	}
	return Unknown
}

func copied(k Kind) bool {
	for _, c := range Copied {
		if c == k {
			return true
		}
	}
	return false
}

// DB is what Run needs of DynamoDB.
type DB interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	delivery.DynamoDB
}

// Config says what to merge.
type Config struct {
	DB DB
	// From is the restored copy (read only); To, the live state table.
	From, To string
	// Apply writes; without it Run only counts what it would copy.
	Apply bool
	// Now is the clock TTLs are compared with (default time.Now).
	Now func() time.Time
}

// Count is what Run did with the rows of one kind.
type Count struct {
	// Restored: rows of the kind in the restored copy.
	Restored int `json:"restored"`
	// Present: rows the live table has (left as they are).
	Present int `json:"present"`
	// Copied: rows copied into the live table (with Apply), or that would
	// be (without).
	Copied int `json:"copied"`
	// Merged: claim items the live table has but with fewer subscription
	// entries, into which the missing entries were merged (with Apply), or
	// would be (without); Entries: how many entries, over those items.
	Merged  int `json:"merged,omitempty"`
	Entries int `json:"entries_merged,omitempty"`
	// Expired: rows whose TTL has passed, not copied.
	Expired int `json:"expired,omitempty"`
	// Resolved: dead letters the live table shows resolved since, not copied.
	Resolved int `json:"resolved,omitempty"`
	// Failed: rows whose read or write failed (Run returns an error).
	Failed int `json:"failed,omitempty"`
}

// Report is what Run did, per kind.
type Report struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Applied bool   `json:"applied"`
	// Kinds: per copied kind. NotCopied: rows of the restored copy per kind
	// left to their owners.
	Kinds     map[Kind]*Count `json:"kinds"`
	NotCopied map[Kind]int    `json:"not_copied"`
	// UnknownKeys: up to 10 partition keys of Unknown rows, to name them.
	UnknownKeys []string `json:"unknown_keys,omitempty"`
	// Copied is the sum of Kinds[*].Copied; Merged, of Kinds[*].Merged.
	Copied int `json:"copied"`
	Merged int `json:"merged"`
}

// batchGetMax is BatchGetItem's limit of keys per request.
const batchGetMax = 100

// Run merges cfg.From into cfg.To. It returns the report so far with an
// error when a read of either table fails, or (after every row was tried)
// when some rows failed; running it again is safe: a row copied before is
// present then.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := Report{From: cfg.From, To: cfg.To, Applied: cfg.Apply, Kinds: map[Kind]*Count{}, NotCopied: map[Kind]int{}}
	for _, k := range Copied {
		r.Kinds[k] = &Count{}
	}
	if cfg.From == "" || cfg.To == "" || cfg.From == cfg.To {
		return r, fmt.Errorf("restore: want a restored table and a different live table, got %q and %q", cfg.From, cfg.To)
	}
	m := &merge{cfg: cfg, r: &r, claims: delivery.NewDynamoStore(cfg.DB, cfg.To)}
	var start map[string]types.AttributeValue
	for {
		out, err := cfg.DB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(cfg.From), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return r, fmt.Errorf("scan the restored table %s: %w", cfg.From, err)
		}
		for _, it := range out.Items {
			if err := m.add(ctx, it); err != nil {
				return r, err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	if err := m.flush(ctx); err != nil {
		return r, err
	}
	for _, c := range r.Kinds {
		r.Copied += c.Copied
		r.Merged += c.Merged
	}
	if m.failed > 0 {
		return r, fmt.Errorf("%d rows could not be copied (first: %w); running again copies what is still missing", m.failed, m.firstErr)
	}
	return r, nil
}

type merge struct {
	cfg      Config
	r        *Report
	claims   *delivery.DynamoStore
	pending  []map[string]types.AttributeValue // candidates whose presence in the live table is not yet read
	failed   int
	firstErr error
}

func str(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func keyOf(it map[string]types.AttributeValue) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{keys.AttrPK: it[keys.AttrPK], keys.AttrSK: it[keys.AttrSK]}
}

// add sorts one restored row: a kind not copied is counted, an expired row
// skipped, a candidate queued for the live table's read.
func (m *merge) add(ctx context.Context, it map[string]types.AttributeValue) error {
	pk := str(it, keys.AttrPK)
	k := KindOf(pk)
	if _, isStr := it[keys.AttrSK].(*types.AttributeValueMemberS); !isStr || pk == "" {
		k = Unknown
	}
	if !copied(k) {
		m.r.NotCopied[k]++
		if k == Unknown && len(m.r.UnknownKeys) < 10 {
			m.r.UnknownKeys = append(m.r.UnknownKeys, pk)
		}
		return nil
	}
	c := m.r.Kinds[k]
	c.Restored++
	if n, ok := it[keys.AttrExpiresAt].(*types.AttributeValueMemberN); ok {
		if exp, err := strconv.ParseInt(n.Value, 10, 64); err == nil && exp <= m.cfg.Now().Unix() {
			c.Expired++
			return nil
		}
	}
	m.pending = append(m.pending, it)
	if len(m.pending) == batchGetMax {
		return m.flush(ctx)
	}
	return nil
}

// flush reads the live copies of the pending rows (consistently, whole: an
// event's claim item is compared entry by entry) and copies the rows the
// live table lacks, or merges the entries a live claim item lacks.
func (m *merge) flush(ctx context.Context) error {
	if len(m.pending) == 0 {
		return nil
	}
	live := map[string]map[string]types.AttributeValue{}
	req := map[string]types.KeysAndAttributes{m.cfg.To: {ConsistentRead: aws.Bool(true)}}
	for _, it := range m.pending {
		ka := req[m.cfg.To]
		ka.Keys = append(ka.Keys, keyOf(it))
		req[m.cfg.To] = ka
	}
	for attempt := 0; len(req) > 0; attempt++ {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				return err
			}
		}
		out, err := m.cfg.DB.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return fmt.Errorf("read the live state table %s: %w", m.cfg.To, err)
		}
		for _, it := range out.Responses[m.cfg.To] {
			live[keys.KeyString(keyOf(it))] = it
		}
		req = out.UnprocessedKeys
	}
	for _, it := range m.pending {
		pk := str(it, keys.AttrPK)
		c := m.r.Kinds[KindOf(pk)]
		cur, present := live[keys.KeyString(keyOf(it))]
		switch {
		case !present:
			m.copy(ctx, it, c)
		case strings.HasPrefix(pk, keys.StateEventClaimPrefix):
			m.mergeClaim(ctx, it, cur, c)
		default:
			c.Present++
		}
	}
	m.pending = m.pending[:0]
	return nil
}

func pause(ctx context.Context, attempt int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(min(attempt, 6)) * 100 * time.Millisecond):
		return nil
	}
}

// maxEntriesPerWrite bounds the entries one merge write adds, so that its
// expressions stay well inside DynamoDB's 4 KB per expression (as
// pkg/delivery bounds a claim write's).
const maxEntriesPerWrite = 25

// maxMergeTries bounds the merge writes of one claim item refused because
// the live item changed since it was read: each refusal returns the item as
// it is now, so a retry only follows a concurrent write.
const maxMergeTries = 8

// missingEntries are the subscription entries (keys.AttrSubClaimPrefix
// attributes) of the restored claim item that the live one lacks, sorted.
func missingEntries(restored, live map[string]types.AttributeValue) []string {
	var out []string
	for name, v := range restored {
		if _, isMap := v.(*types.AttributeValueMemberM); !isMap || !strings.HasPrefix(name, keys.AttrSubClaimPrefix) {
			continue
		}
		if _, has := live[name]; !has {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// mergeClaim adds to the live claim item the subscription entries of the
// restored one it lacks, as they were restored, each conditioned on the
// live item still lacking it: an entry the live item has is newer and
// stays. A dead entry also joins keys.AttrDeadSubs and takes the item's TTL
// away, as delivery's Kill does (a dead claim never expires). A refused
// write (another writer changed the item since it was read) is retried
// against the item as it is then; an item deleted since is copied whole.
func (m *merge) mergeClaim(ctx context.Context, restored, live map[string]types.AttributeValue, c *Count) {
	missing := missingEntries(restored, live)
	if len(missing) == 0 {
		c.Present++
		return
	}
	if !m.cfg.Apply {
		c.Merged++
		c.Entries += len(missing)
		return
	}
	added := 0
	for tries := 0; len(missing) > 0; {
		chunk := missing[:min(len(missing), maxEntriesPerWrite)]
		err := m.addEntries(ctx, restored, chunk)
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			added += len(chunk)
			missing = missing[len(chunk):]
			continue
		case !errors.As(err, &ccf):
			m.fail(c, fmt.Errorf("merge %d claim entries into %s / %s in %s: %w", len(missing), str(restored, keys.AttrPK), str(restored, keys.AttrSK), m.cfg.To, err))
			return
		}
		if tries++; tries == maxMergeTries {
			m.fail(c, fmt.Errorf("merge claim entries into %s / %s in %s: the live item changed under %d writes in a row; running again merges what is still missing",
				str(restored, keys.AttrPK), str(restored, keys.AttrSK), m.cfg.To, tries))
			return
		}
		if len(ccf.Item) == 0 { // deleted since the read
			if added == 0 {
				m.copy(ctx, restored, c) // the whole restored row, as for any row the live table lacks
				return
			}
			m.fail(c, fmt.Errorf("merge claim entries into %s / %s in %s: the live item was deleted during the merge; running again copies it",
				str(restored, keys.AttrPK), str(restored, keys.AttrSK), m.cfg.To))
			return
		}
		missing = missingEntries(restored, ccf.Item)
	}
	if added == 0 {
		c.Present++ // a concurrent writer added every entry: the live item wins
		return
	}
	c.Merged++
	c.Entries += added
}

// addEntries writes the restored entries names into the live claim item, if
// it exists and still lacks every one of them.
func (m *merge) addEntries(ctx context.Context, restored map[string]types.AttributeValue, names []string) error {
	attr := map[string]string{"#pk": keys.AttrPK}
	vals := map[string]types.AttributeValue{}
	var sets, conds, dead []string
	conds = append(conds, "attribute_exists(#pk)")
	for i, name := range names {
		np, vp := "#e"+strconv.Itoa(i), ":e"+strconv.Itoa(i)
		attr[np], vals[vp] = name, restored[name]
		sets = append(sets, np+" = "+vp)
		conds = append(conds, "attribute_not_exists("+np+")")
		if e := restored[name].(*types.AttributeValueMemberM).Value; str(e, keys.ClaimFieldStatus) == keys.ClaimDead {
			dead = append(dead, strings.TrimPrefix(name, keys.AttrSubClaimPrefix))
		}
	}
	expr := "SET " + strings.Join(sets, ", ")
	if len(dead) > 0 {
		attr["#ds"], attr["#exp"] = keys.AttrDeadSubs, keys.AttrExpiresAt
		vals[":ds"] = &types.AttributeValueMemberSS{Value: dead}
		expr += " ADD #ds :ds REMOVE #exp"
	}
	_, err := m.cfg.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(m.cfg.To), Key: keyOf(restored),
		UpdateExpression: aws.String(expr), ConditionExpression: aws.String(strings.Join(conds, " AND ")),
		ExpressionAttributeNames: attr, ExpressionAttributeValues: vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// copy puts one row the live table lacks, conditioned on its still lacking
// it.
func (m *merge) copy(ctx context.Context, it map[string]types.AttributeValue, c *Count) {
	if KindOf(str(it, keys.AttrPK)) == DeadLetters {
		resolved, err := m.resolvedSince(ctx, it)
		if err != nil {
			m.fail(c, err)
			return
		}
		if resolved {
			c.Resolved++
			return
		}
	}
	if !m.cfg.Apply {
		c.Copied++
		return
	}
	_, err := m.cfg.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(m.cfg.To), Item: it,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": keys.AttrPK},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		c.Present++ // written since the read: the live row wins
	case err != nil:
		m.fail(c, fmt.Errorf("copy %s / %s into %s: %w", str(it, keys.AttrPK), str(it, keys.AttrSK), m.cfg.To, err))
	default:
		c.Copied++
	}
}

func (m *merge) fail(c *Count, err error) {
	c.Failed++
	m.failed++
	if m.firstErr == nil {
		m.firstErr = err
	}
}

// resolvedSince reports whether the live table shows the dead letter it
// resolved after the restore point: its claim entry completed, or its
// resolution in the dead-letter history. Copying it back would leave a dead
// letter dlq-repair cannot replay (its claim is not dead).
func (m *merge) resolvedSince(ctx context.Context, it map[string]types.AttributeValue) (bool, error) {
	tenant := strings.TrimPrefix(str(it, keys.AttrPK), keys.StateDeadPrefix)
	sk := str(it, keys.AttrSK)
	eventID, sub, ok := strings.Cut(sk, ":")
	if !ok {
		return false, nil
	}
	rec, found, err := m.claims.Get(ctx, delivery.Key{EventID: eventID, Subscription: sub})
	if err != nil {
		return false, fmt.Errorf("read the live claim of dead letter %s: %w", sk, err)
	}
	if found && rec.Status == delivery.StatusCompleted {
		return true, nil
	}
	out, err := m.cfg.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(m.cfg.To), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateDeadLogPrefix + tenant},
			keys.AttrSK: &types.AttributeValueMemberS{Value: sk},
		}})
	if err != nil {
		return false, fmt.Errorf("read the live history of dead letter %s: %w", sk, err)
	}
	return out.Item != nil, nil
}
