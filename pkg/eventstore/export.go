package eventstore

import (
	"context"
	"fmt"
	"io"

	"github.com/fourlanes/fourlanes/pkg/chain"
)

// ExportResult says what Export wrote.
type ExportResult struct {
	Events int64       // event lines written
	Head   *chain.Head // the head line written; nil for a tenant without events
}

// Export writes tenant's chain as an export (pkg/chain/SPEC.md §5): every
// event from seq 1 in canonical form, then the head line. It reads the head
// first and then the events up to the head's last_seq, so events appended
// meanwhile are left out and the export is one consistent cut of the log.
//
// A row that does not decode stops the export with an error naming its seq:
// an export that left it out would verify as a gap, not as what it is. Run
// reconcile on the tenant to see the break.
func (s *Store) Export(ctx context.Context, tenant string, w io.Writer) (ExportResult, error) {
	var res ExportResult
	head, err := s.Head(ctx, tenant)
	if err != nil {
		return res, err
	}
	if head == nil {
		return res, nil
	}
	ew := chain.NewExportWriter(w)
	// Pages ask for no more than the cut still needs, so events appended
	// since the head was read are not read at all.
	for after := int64(0); after < head.LastSeq; {
		p, err := s.Events(ctx, tenant, after, int32(min(500, head.LastSeq-after)))
		if err != nil {
			return res, err
		}
		for i := range p.Events {
			if p.Errs[i] != nil {
				return res, fmt.Errorf("export tenant %q: event row after seq %d does not decode: %w", tenant, after, p.Errs[i])
			}
			if e := &p.Events[i]; e.Seq <= head.LastSeq { // a gap can bring later seqs into the page
				if err := ew.Event(e); err != nil {
					return res, err
				}
				res.Events++
			}
			after = p.Events[i].Seq
		}
		if p.Next == 0 || len(p.Events) == 0 {
			break
		}
	}
	if err := ew.Head(head); err != nil {
		return res, err
	}
	res.Head = head
	return res, nil
}
