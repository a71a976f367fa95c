package chain

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

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
// event's (in an export without events, the head line's). Every line gets a
// verdict: a broken chain is a *BreakError at the first break, at a seq, or
// at a line when the line's seq cannot be read (not JSON, not an object, a
// malformed head line, a line after the head line). Other errors are
// ErrEmptyExport and failures to read r.
//
// A line in canonical form (as WriteExport writes it) is hashed in place
// (envelope.ScanCanonical); any other line is read strictly
// (envelope.ReadObject) and re-encoded. Both give the same verdict.
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
	malformedLine := func(line int, got string) error {
		return &BreakError{Tenant: tenant, Line: line, Reason: ReasonMalformed,
			Expected: "an event line with a readable seq, or the head line last", Got: got}
	}
	err := forEachLine(r, func(line int, b []byte) error {
		if sum.Head != nil {
			return malformedLine(line, "a line after the head line")
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
		o, err := envelope.ReadObject(b)
		if err != nil {
			return malformedLine(line, err.Error())
		}
		if o.Has("head") {
			h, err := readHead(o)
			if err != nil {
				return malformedLine(line, "a malformed head line: "+err.Error())
			}
			sum.Head = h
			return nil
		}
		ev := o.Event()
		if !ev.SeqRead {
			return malformedLine(line, "an event line whose seq cannot be read (want it once, an integer within ±(2^53-1) without fraction or exponent)")
		}
		if v == nil {
			start(ev.Envelope.TenantID)
		}
		return v.nextRead(&ev)
	}, malformedLine)
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

// readHead reads the head line {"head":{"tenant_id":T,"last_seq":N,"last_hash":H}}:
// those members only, each once, T and H strings, N an integer from 0 to
// 2^53−1 without fraction or exponent, and the line valid I-JSON.
func readHead(o *envelope.Object) (*Head, error) {
	if o.Violation != nil {
		return nil, fmt.Errorf("not I-JSON: %w", o.Violation)
	}
	if names := o.Names(); len(names) != 1 {
		return nil, fmt.Errorf("members %q; want head only", names)
	}
	hv, _ := o.Member("head")
	m, ok := hv.(map[string]any)
	if !ok || len(m) != 3 {
		return nil, errors.New("head is not an object of tenant_id, last_seq and last_hash")
	}
	t, tok := m["tenant_id"].(string)
	h, hok := m["last_hash"].(string)
	n, nok := m["last_seq"].(json.Number)
	if !tok || !hok || !nok {
		return nil, errors.New("head is not an object of tenant_id (a string), last_seq (an integer) and last_hash (a string)")
	}
	seq, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || seq < 0 || seq > envelope.MaxSeq || strings.HasPrefix(string(n), "-") {
		return nil, fmt.Errorf("last_seq %s is not an integer from 0 to 2^53-1 without fraction or exponent", n)
	}
	return &Head{TenantID: t, LastSeq: seq, LastHash: h}, nil
}

// maxExportLine bounds one line of an export: an event item is at most
// 400 KB, and its JSON, with escapes, well under this. A longer line is
// malformed.
const maxExportLine = 8 << 20

// forEachLine calls fn with each non-blank line of an export and its number
// (from 1), and stops at fn's first error. Lines end at '\n'; blank means
// only JSON whitespace, which is trimmed from both ends. A line over
// maxExportLine stops it with tooLong's error.
func forEachLine(r io.Reader, fn func(line int, b []byte) error, tooLong func(line int, got string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxExportLine+1)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.Trim(sc.Bytes(), " \t\r")
		if len(b) > maxExportLine {
			return tooLong(n, fmt.Sprintf("a line over %d bytes", maxExportLine))
		}
		if len(b) > 0 {
			if err := fn(n, b); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return tooLong(n+1, fmt.Sprintf("a line over %d bytes", maxExportLine))
		}
		return fmt.Errorf("export line %d: %w", n+1, err)
	}
	return nil
}
