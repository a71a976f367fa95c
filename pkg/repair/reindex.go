package repair

// Reindexing dead letters: a dead letter written before the dead-letter
// index existed carries no index attribute, so the hourly run, which finds
// tenants through the index only, would not see it. A run with
// Request.ReindexDeadLetters (once, after the upgrade) scans the state
// table for such rows, keys only, and indexes them, saving its position
// after each page so that the next run resumes there. It is the one Scan of
// the state table dlq-repair ever issues, and only when asked.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// SourceReindex is the report key of a reindex run.
const SourceReindex = "reindex_dead_letters"

// DeadLetterIndexer puts a dead letter into the index (*delivery.DynamoStore).
type DeadLetterIndexer interface {
	IndexDeadLetter(ctx context.Context, tenant, sk string) error
}

const reindexCursor = "reindex-dead-letters"

// reindexDeadLetters indexes every unindexed dead letter it reaches.
func (r *Repairer) reindexDeadLetters(ctx context.Context, sr *SourceReport) (bool, error) {
	ix, ok := r.cfg.DeadLetters.(DeadLetterIndexer)
	if !ok || r.cfg.Cursors == nil {
		return false, fmt.Errorf("reindex: this dlq-repair cannot index dead letters (Config.DeadLetters must be a *delivery.DynamoStore, Config.Cursors set)")
	}
	from, err := r.cfg.Cursors.Cursor(ctx, reindexCursor)
	if err != nil {
		return false, err
	}
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(r.cfg.StateTable),
		ProjectionExpression:      aws.String("#pk, #sk"),
		FilterExpression:          aws.String("begins_with(#pk, :dead) AND attribute_not_exists(#ix)"),
		ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK, "#sk": keys.AttrSK, "#ix": keys.AttrDeadIndex},
		ExpressionAttributeValues: map[string]types.AttributeValue{":dead": &types.AttributeValueMemberS{Value: keys.StateDeadPrefix}},
		ExclusiveStartKey:         from,
	}
	if r.cfg.ScanPage > 0 {
		in.Limit = aws.Int32(r.cfg.ScanPage)
	}
	r.onPage = func(next map[string]types.AttributeValue) error {
		return r.cfg.Cursors.SaveCursor(context.WithoutCancel(ctx), reindexCursor, next, r.cfg.Now())
	}
	defer func() { r.onPage = nil }()
	var errs []string
	n := 0
	done, err := r.scan(ctx, in, func(it map[string]types.AttributeValue) {
		pk, _ := it[keys.AttrPK].(*types.AttributeValueMemberS)
		sk, _ := it[keys.AttrSK].(*types.AttributeValueMemberS)
		if pk == nil || sk == nil {
			return
		}
		tenant := strings.TrimPrefix(pk.Value, keys.StateDeadPrefix)
		if err := ix.IndexDeadLetter(ctx, tenant, sk.Value); err != nil {
			errs = append(errs, err.Error())
			return
		}
		n++
	})
	it := Item{Source: SourceReindex, Via: ViaTable, Records: n}
	switch {
	case err != nil:
		it.Outcome, it.Reason, it.Error = Open, "the scan failed; the next run resumes at the saved position", err.Error()
	case len(errs) > 0:
		it.Outcome, it.Reason, it.Error = Open, fmt.Sprintf("%d dead letters could not be indexed; run again", len(errs)), strings.Join(errs, "; ")
	case !done:
		it.Outcome, it.Reason = Open, "out of time; the next run resumes at the saved position"
	default:
		it.Outcome, it.Reason = Fixed, fmt.Sprintf("indexed %d dead letters written before the dead-letter index", n)
	}
	r.cfg.Logger.InfoContext(ctx, "reindexed dead letters", slog.Int(obs.KeyIndexed, n), slog.Bool(obs.KeyDone, done && err == nil))
	r.record(ctx, sr, it)
	return done && err == nil && len(errs) == 0, nil
}
