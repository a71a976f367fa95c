package tamper

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Event is a DynamoDB stream event whose records are decoded one at a time,
// so a record the decoder refuses is reported instead of failing the batch.
type Event struct {
	Records []json.RawMessage `json:"Records"`
}

// Handler is tamper-watch's Lambda handler. A deployed stack maps it to the
// state table's stream only: records whose eventSourceARN names StateTable
// are InspectState'd, with State reading the claims. Any other record is
// Inspected as one of the events table's (the notary watches that stream in
// a deployed stack).
type Handler struct {
	Logger     *slog.Logger
	Metrics    *obs.Metrics
	StateTable string
	State      ItemReader
}

// Handle reports every change to the log in a batch: an ERROR line naming the
// tenant, the seq and what changed, and one TamperDetected metric (dimension
// Change) per change. It never fails the batch: a retry cannot undo a change,
// and a failing mapping would stop watching the shard.
func (h *Handler) Handle(ctx context.Context, ev Event) error {
	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	for _, raw := range ev.Records {
		var src struct {
			ARN string `json:"eventSourceARN"`
		}
		_ = json.Unmarshal(raw, &src)
		var f Finding
		var tampered bool
		if h.StateTable != "" && tableOf(src.ARN) == h.StateTable {
			f, tampered = InspectState(ctx, raw, h.State, h.StateTable)
		} else {
			f, tampered = Inspect(raw)
		}
		if !tampered {
			continue
		}
		h.Metrics.Count(keys.MetricTamperDetected, 1, "Change", string(f.Change))
		log.ErrorContext(ctx, fmt.Sprintf("log tampered: %s of tenant %q seq %s: %s", f.Change, f.Tenant, f.Seq, f.What),
			slog.String(obs.KeyChange, string(f.Change)),
			slog.String(obs.KeyTenant, f.Tenant),
			slog.String(obs.KeySeq, f.Seq),
			slog.String(obs.KeyWhat, f.What),
			slog.String(obs.KeyStreamEventName, f.EventName),
			slog.String(obs.KeyStreamEventID, f.EventID),
			slog.String(obs.KeyStreamSeq, f.StreamSeq),
			slog.String(obs.KeyPrincipal, f.Principal))
	}
	return nil
}
