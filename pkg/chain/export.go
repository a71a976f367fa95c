package chain

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Export is one tenant's chain as JSON Lines (SPEC.md §5): one envelope per
// line in seq order, then optionally one line {"head":{…}}.
type Export struct {
	Events []envelope.Envelope
	Head   *Head
}

// WriteExport writes x as JSON Lines, each event in its canonical form
// (envelope.CanonicalJSON), which VerifyExport hashes in place.
func WriteExport(w io.Writer, x Export) error {
	ew := NewExportWriter(w)
	for i := range x.Events {
		if err := ew.Event(&x.Events[i]); err != nil {
			return err
		}
	}
	if x.Head != nil {
		return ew.Head(x.Head)
	}
	return nil
}

// ExportWriter writes an export one event at a time, for a tenant too large
// to hold in memory.
type ExportWriter struct {
	w     io.Writer
	lines int
}

// NewExportWriter writes an export to w.
func NewExportWriter(w io.Writer) *ExportWriter { return &ExportWriter{w: w} }

// Event writes e's line: RFC 8785 of the whole envelope, hash included.
func (x *ExportWriter) Event(e *envelope.Envelope) error {
	x.lines++
	b, err := e.CanonicalJSON()
	if err != nil {
		return fmt.Errorf("export line %d (seq %d): %w", x.lines, e.Seq, err)
	}
	if _, err := x.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("export line %d (seq %d): %w", x.lines, e.Seq, err)
	}
	return nil
}

// Head writes the closing head line, {"head":{…}}; nothing may follow it.
func (x *ExportWriter) Head(h *Head) error {
	x.lines++
	b, err := json.Marshal(map[string]*Head{"head": h})
	if err != nil {
		return fmt.Errorf("export head: %w", err)
	}
	if _, err := x.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("export head (line %d): %w", x.lines, err)
	}
	return nil
}

// ExportSummary is what VerifyExport read.
type ExportSummary struct {
	Tenant  string // the tenant verified
	Events  int64  // events verified from genesis
	InPlace int64  // of them, hashed in place from their canonical line
	Head    *Head  // the head line, if there was one
}

// ErrEmptyExport reports an export with no event and no head line, verified
// without a tenant to expect.
var ErrEmptyExport = errors.New("empty export: no events, no head line and no tenant given")

// VerifyExport reads an export (SPEC.md §5) from r and verifies it from
// genesis as SPEC.md §6 says, streaming: memory stays bounded by the longest
// line. tenant is the tenant the chain must belong to; "" takes the first
// event's (in an export without events, the head line's). A broken chain is
// a *BreakError at the first break; a line that is not JSON of an envelope or
// a head, or data after the head line, is an error naming the line, if it
// comes before any break.
//
// A line in canonical form (as WriteExport writes it) is hashed in place
// (envelope.ScanCanonical); any other line is decoded and re-encoded. Both
// give the same verdict.
func VerifyExport(r io.Reader, tenant string) (ExportSummary, error) {
	return verifyExport(r, tenant, true)
}

func verifyExport(r io.Reader, tenant string, inPlace bool) (ExportSummary, error) {
	var sum ExportSummary
	var v *Verifier
	start := func(eventTenant string) {
		if tenant == "" {
			tenant = eventTenant
		}
		v = NewVerifier(tenant)
	}
	err := forEachLine(r, func(line int, b []byte) error {
		if sum.Head != nil {
			return fmt.Errorf("export line %d: data after the head line", line)
		}
		if inPlace {
			if c, ok := envelope.ScanCanonical(b); ok {
				if v == nil {
					start(string(c.TenantID))
				}
				if err := v.NextCanonical(&c); err != nil {
					return err
				}
				sum.InPlace++
				return nil
			}
		}
		head, e, err := decodeLine(line, b)
		switch {
		case err != nil:
			return err
		case head != nil:
			sum.Head = head
			return nil
		}
		if v == nil {
			start(e.TenantID)
		}
		return v.Next(&e)
	})
	if err != nil {
		if v != nil {
			sum.Tenant, sum.Events = v.tenant, v.verified
		}
		return sum, err
	}
	if v == nil {
		if tenant == "" && sum.Head == nil {
			return sum, ErrEmptyExport
		}
		if tenant == "" {
			tenant = sum.Head.TenantID
		}
		v = NewVerifier(tenant)
	}
	sum.Tenant, sum.Events = v.tenant, v.verified
	return sum, v.Head(sum.Head)
}

// maxExportLine bounds one line of an export: an event item is at most
// 400 KB, and its JSON, with escapes, well under this.
const maxExportLine = 8 << 20

// forEachLine calls fn with each non-blank line of an export and its number
// (from 1), and stops at fn's first error.
func forEachLine(r io.Reader, fn func(line int, b []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxExportLine)
	n := 0
	for sc.Scan() {
		n++
		if b := bytes.TrimSpace(sc.Bytes()); len(b) > 0 {
			if err := fn(n, b); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("export line %d: %w", n+1, err)
	}
	return nil
}

// decodeLine decodes line n of an export: the head line (head non-nil) or an
// event.
func decodeLine(n int, b []byte) (*Head, envelope.Envelope, error) {
	var probe struct {
		Head *Head `json:"head"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, envelope.Envelope{}, fmt.Errorf("export line %d: %w", n, err)
	}
	if probe.Head != nil {
		return probe.Head, envelope.Envelope{}, nil
	}
	e, err := envelope.FromJSON(b)
	if err != nil {
		return nil, e, fmt.Errorf("export line %d: %w", n, err)
	}
	return nil, e, nil
}
