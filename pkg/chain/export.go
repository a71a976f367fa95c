package chain

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Export is one tenant's chain as JSON Lines (SPEC.md §5): one envelope per
// line in seq order, then optionally one line {"head":{…}}.
type Export struct {
	Tenant string
	Events []envelope.Envelope
	Head   *Head
}

// WriteExport writes x as JSON Lines.
func WriteExport(w io.Writer, x Export) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range x.Events {
		if err := enc.Encode(&x.Events[i]); err != nil {
			return fmt.Errorf("export line %d: %w", i+1, err)
		}
	}
	if x.Head != nil {
		if err := enc.Encode(map[string]*Head{"head": x.Head}); err != nil {
			return fmt.Errorf("export head: %w", err)
		}
	}
	return nil
}

// ReadExport parses a JSON Lines export. Its tenant is the head line's, else
// the first event's; a verifier that knows the tenant should use that instead.
func ReadExport(r io.Reader) (Export, error) {
	var x Export
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 8<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if x.Head != nil {
			return x, fmt.Errorf("export line %d: data after the head line", line)
		}
		var probe struct {
			Head *Head `json:"head"`
		}
		if err := json.Unmarshal(b, &probe); err != nil {
			return x, fmt.Errorf("export line %d: %w", line, err)
		}
		if probe.Head != nil {
			x.Head = probe.Head
			continue
		}
		e, err := envelope.FromJSON(b)
		if err != nil {
			return x, fmt.Errorf("export line %d: %w", line, err)
		}
		x.Events = append(x.Events, e)
	}
	if err := sc.Err(); err != nil {
		return x, fmt.Errorf("export line %d: %w", line+1, err)
	}
	switch {
	case x.Head != nil:
		x.Tenant = x.Head.TenantID
	case len(x.Events) > 0:
		x.Tenant = x.Events[0].TenantID
	}
	return x, nil
}
