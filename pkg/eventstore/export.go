package eventstore

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// ExportResult says what Export wrote.
type ExportResult struct {
	Events int64       // event lines written
	Head   *chain.Head // the head line written; nil for a tenant without events
	Reads  int64       // event items DynamoDB returned
	Pages  int64       // Query requests made for them
}

// ExportOptions tune ExportWith.
type ExportOptions struct {
	// Parallel is how many seq ranges are read at once, each by its own
	// paginated Query; < 1 is 1. The lines are written in seq order
	// whatever it is.
	Parallel int
	// RangeSeqs is how many seqs one range covers (default
	// DefaultExportRangeSeqs). Ranges are handed to the readers in seq
	// order, and at most five ranges per reader are in memory at once (one
	// being read, one read, one being encoded, two encoded), so memory stays
	// bounded by about 5 × Parallel × RangeSeqs events.
	RangeSeqs int64
}

// DefaultExportRangeSeqs is a range of about one 1-MB Query page of 1-KB
// events: one request per range for the common event size.
const DefaultExportRangeSeqs = 1000

// Export writes tenant's chain as an export (pkg/chain/SPEC.md §5) with one
// reader: ExportWith and ExportOptions{Parallel: 1}.
func (s *Store) Export(ctx context.Context, tenant string, w io.Writer) (ExportResult, error) {
	return s.ExportWith(ctx, tenant, w, ExportOptions{Parallel: 1})
}

// ExportWith writes tenant's chain as an export (pkg/chain/SPEC.md §5):
// every event from seq 1 in canonical form, then the head line. It reads the
// head first and then the events up to the head's last_seq, so events
// appended meanwhile are left out and the export is one consistent cut of
// the log.
//
// [1, last_seq] is cut into ranges of o.RangeSeqs seqs; o.Parallel readers
// each read whole ranges (a strongly consistent Query on seq BETWEEN the
// range's ends, paginated with no Limit: pages of up to 1 MB) and encode
// their lines, and the writer writes the ranges in seq order. A missing seq
// is written as missing (the export then verifies as a gap there, as it
// is); a row that does not decode, or a range that cannot be read, stops
// the export with an error naming it: a partial export is never returned as
// a whole one.
func (s *Store) ExportWith(ctx context.Context, tenant string, w io.Writer, o ExportOptions) (ExportResult, error) {
	var res ExportResult
	head, err := s.Head(ctx, tenant)
	if err != nil {
		return res, err
	}
	if head == nil {
		return res, nil
	}
	par, size := max(o.Parallel, 1), o.RangeSeqs
	if size <= 0 {
		size = DefaultExportRangeSeqs
	}
	ranges := (head.LastSeq + size - 1) / size
	par = int(min(int64(par), max(ranges, 1)))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Range r is read by reader r % par, which sends it on results[r % par]:
	// each reader's ranges arrive in order on its own channel, so the writer
	// takes range r from channel r % par and the ranges come out in seq
	// order. A buffer of 2 lets each reader run two ranges ahead.
	results := make([]chan exportRange, par)
	for k := range results {
		results[k] = make(chan exportRange, 2)
		// Each reader is two stages: one goroutine reads its ranges and the
		// other encodes them, so the next range's Query is in flight while
		// the last one's rows are encoded.
		fetched := make(chan exportRange, 1)
		go func(k int) {
			defer close(fetched)
			for r := int64(k); r < ranges; r += int64(par) {
				lo, hi := r*size+1, min((r+1)*size, head.LastSeq)
				got := s.fetchRange(ctx, tenant, lo, hi)
				select {
				case fetched <- got:
				case <-ctx.Done():
					return
				}
				if got.err != nil {
					return
				}
			}
		}(k)
		go func(k int) {
			defer close(results[k])
			for got := range fetched {
				if got.err == nil {
					encodeRange(tenant, &got)
				}
				select {
				case results[k] <- got:
				case <-ctx.Done():
					return
				}
				if got.err != nil {
					return
				}
			}
		}(k)
	}
	for r := int64(0); r < ranges; r++ {
		got, ok := <-results[r%int64(par)]
		if !ok { // the reader stopped: ctx was cancelled
			return res, fmt.Errorf("export tenant %q: %w", tenant, context.Cause(ctx))
		}
		res.Reads += got.reads
		res.Pages += got.pages
		if got.err != nil {
			return res, got.err
		}
		if _, err := w.Write(got.lines); err != nil {
			return res, fmt.Errorf("export tenant %q (seq %d to %d): %w", tenant, got.lo, got.hi, err)
		}
		res.Events += got.events
	}
	if err := chain.NewExportWriter(w).Head(head); err != nil {
		return res, err
	}
	res.Head = head
	return res, nil
}

// exportRange is one range of an export, read and encoded.
type exportRange struct {
	lo, hi       int64
	items        []map[string]types.AttributeValue // the rows read, until encoded
	lines        []byte                            // the events' lines, in seq order
	events       int64
	reads, pages int64
	err          error
}

// fetchRange reads tenant's events with lo ≤ seq ≤ hi: one paginated
// strongly consistent Query, no Limit (pages of up to 1 MB).
func (s *Store) fetchRange(ctx context.Context, tenant string, lo, hi int64) exportRange {
	out := exportRange{lo: lo, hi: hi}
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		ConsistentRead:         aws.Bool(true),
		KeyConditionExpression: aws.String("#t = :t AND #s BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{
			"#t": keys.AttrTenant, "#s": keys.AttrSeq,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t":  &types.AttributeValueMemberS{Value: tenant},
			":lo": &types.AttributeValueMemberN{Value: strconv.FormatInt(lo, 10)},
			":hi": &types.AttributeValueMemberN{Value: strconv.FormatInt(hi, 10)},
		},
	}
	for {
		page, err := s.db.Query(ctx, in)
		if err != nil {
			after := lo - 1
			if n := len(out.items); n > 0 {
				if v, ok := out.items[n-1][keys.AttrSeq].(*types.AttributeValueMemberN); ok {
					after, _ = strconv.ParseInt(v.Value, 10, 64)
				}
			}
			out.err = fmt.Errorf("export tenant %q: read seq %d to %d (after seq %d): %w", tenant, lo, hi, after, err)
			return out
		}
		out.pages++
		out.reads += int64(len(page.Items))
		out.items = append(out.items, page.Items...)
		if page.LastEvaluatedKey == nil {
			return out
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// encodeRange turns a fetched range's rows into export lines, in seq order.
func encodeRange(tenant string, out *exportRange) {
	lo, hi := out.lo, out.hi
	after := lo - 1
	for _, it := range out.items {
		// The line straight from the row; a row not certainly well
		// formed is decoded, which names what is wrong with it.
		lines, c, ok := envelope.AppendItemLine(out.lines, it)
		seq := c.Seq
		if !ok {
			e, err := envelope.FromItem(it)
			if err != nil {
				out.err = fmt.Errorf("export tenant %q: event row after seq %d does not decode: %w", tenant, after, err)
				return
			}
			if lines, err = e.AppendCanonicalJSON(out.lines); err != nil {
				out.err = fmt.Errorf("export tenant %q: seq %d: %w", tenant, e.Seq, err)
				return
			}
			seq = e.Seq
		}
		if seq <= after || seq > hi {
			out.err = fmt.Errorf("export tenant %q: range seq %d to %d returned seq %d after seq %d", tenant, lo, hi, seq, after)
			return
		}
		out.lines = append(lines, '\n')
		out.events++
		after = seq
	}
	out.items = nil
}
