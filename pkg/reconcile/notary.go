package reconcile

// Comparing the table with the notary's view. The notary (pkg/notary) is the
// one signer of checkpoints: it keeps, per chain, the last (seq, hash) it saw
// appended on the events stream, and marks a chain broken when it saw the
// log rewritten, truncated, rolled back or planted. A walk that reaches the
// head compares the table with that view: a table can be rewritten
// consistently (every hash recomputed, the head moved), its stream cannot.

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/notary"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Reasons a walk breaks on what the notary saw, or on what delivery saw.
const (
	// ReasonNotaryFinding: the notary saw the chain changed in a way no
	// append makes (its finding is in Got); it signs nothing more of it.
	ReasonNotaryFinding chain.Reason = "notary finding"
	// ReasonNotaryMismatch: the head stands at a seq the notary saw
	// appended, with another hash.
	ReasonNotaryMismatch chain.Reason = "notary mismatch"
	// ReasonRollback: the head is below a seq the notary saw appended, or
	// below a DURABLE subscription's delivery watermark (events delivered
	// that the log no longer has).
	ReasonRollback chain.Reason = "rollback"
)

// NotaryStates reads the notary's view of a chain (*notary.DynamoStore).
type NotaryStates interface {
	Load(ctx context.Context, chainName string) (*notary.State, error)
}

var _ NotaryStates = (*notary.DynamoStore)(nil)

// NotaryView is what a report says of the notary's view of the chain.
type NotaryView struct {
	// Seq and Hash: the last event the notary saw appended.
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
	// Signed: the last seq it signed.
	Signed int64 `json:"signed_seq"`
	// Unsigned: events at or below the head the notary has not vouched
	// for yet (it is behind the stream, or stopped).
	Unsigned int64 `json:"unsigned"`
	// Broken, Findings, FirstFinding (the cause) and LastFinding: what it
	// refused to sign.
	Broken       bool   `json:"broken"`
	Findings     int    `json:"findings"`
	FirstFinding string `json:"first_finding,omitempty"`
	LastFinding  string `json:"last_finding,omitempty"`
}

// compareNotary compares the head with the notary's view of the chain, and
// returns the break it shows (nil when they agree).
func (r *Reconciler) compareNotary(ctx context.Context, tenant string, head *chain.Head, rep *Report) (*chain.BreakError, error) {
	if r.cfg.Notary == nil {
		return nil, nil
	}
	st, err := r.cfg.Notary.Load(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("read the notary's view of %q: %w", tenant, err)
	}
	rep.StateReads++
	last, lastHash := int64(0), ""
	if head != nil {
		last, lastHash = head.LastSeq, head.LastHash
	}
	if st == nil {
		if last > 0 {
			rep.addFindings(Finding{Kind: FindingNotaryNoView, Reason: fmt.Sprintf("the notary has no view of this chain: none of its %d events is vouched for", last)})
		}
		return nil, nil
	}
	rep.Notary = &NotaryView{Seq: st.Seq, Hash: st.Hash, Signed: st.Signed, Unsigned: max(0, last-st.Seq),
		Broken: st.Broken, Findings: st.Findings, FirstFinding: st.FirstFinding, LastFinding: st.LastFinding}
	brk := func(seq int64, reason chain.Reason, expected, got string) *chain.BreakError {
		return &chain.BreakError{Tenant: tenant, Seq: seq, Reason: reason, Expected: expected, Got: got}
	}
	if !st.Broken && st.Findings > 0 {
		// Findings that leave the chain whole (a head row of another shape,
		// a changed idempotency-key row): still signed, still reported.
		rep.addFindings(Finding{Kind: FindingNotary, Key: "whole", Reason: fmt.Sprintf(
			"notary, %d findings that leave the chain whole (still signed); first: %s; latest: %s", st.Findings, st.FirstFinding, st.LastFinding)})
	}
	switch {
	case st.Broken:
		first := st.FirstFinding
		if first == "" {
			first = st.LastFinding
		}
		rep.addFindings(Finding{Kind: FindingNotary, Reason: "notary: " + first})
		if st.Findings > 1 && st.LastFinding != first {
			rep.addFindings(Finding{Kind: FindingNotary, Key: "latest", Reason: fmt.Sprintf("notary, latest of %d findings: %s", st.Findings, st.LastFinding)})
		}
		return brk(st.Seq+1, ReasonNotaryFinding, fmt.Sprintf("the chain as the notary saw it appended (through seq %d)", st.Seq), first), nil
	case last < st.Seq:
		rep.addFindings(Finding{Kind: FindingRollback, Reason: fmt.Sprintf("rollback: the head is at seq %d, the notary saw seq %d appended", last, st.Seq)})
		return brk(last+1, ReasonRollback, fmt.Sprintf("events through seq %d (seen appended by the notary)", st.Seq), fmt.Sprintf("the head at seq %d", last)), nil
	case last == st.Seq && lastHash != st.Hash:
		rep.addFindings(Finding{Kind: FindingRewrite, Reason: fmt.Sprintf("rewrite: the head's hash at seq %d is not the one the notary saw appended", last)})
		return brk(last, ReasonNotaryMismatch, "hash "+st.Hash+" (seen appended by the notary)", "hash "+lastHash), nil
	}
	if rep.Notary.Unsigned > 0 {
		r.log.InfoContext(ctx, "events not vouched for by the notary yet", slog.Int64(obs.KeyUnsigned, rep.Notary.Unsigned),
			slog.Int64(obs.KeySeq, st.Seq), slog.Int64(obs.KeyLastSeq, last))
	}
	return nil, nil
}

// watermarkRollback reports a DURABLE subscription's delivery watermark
// above the head: events were delivered that the log no longer has, free
// proof of a rollback.
func (r *Reconciler) watermarkRollback(ctx context.Context, tenant string, rep *Report) {
	for _, sd := range rep.Subscriptions {
		if sd.Watermark <= rep.LastSeq {
			continue
		}
		what := fmt.Sprintf("rollback: subscription %s settled through seq %d, above the head at seq %d", sd.Subscription, sd.Watermark, rep.LastSeq)
		rep.addFindings(Finding{Kind: FindingRollback, Key: sd.Subscription, Reason: what})
		if rep.FirstBreak == nil {
			f := false
			rep.ChainIntact = &f
			rep.FirstBreak = &Break{Seq: rep.LastSeq + 1, Reason: ReasonRollback,
				Expected: fmt.Sprintf("events through seq %d (delivered to %s)", sd.Watermark, sd.Subscription),
				Got:      fmt.Sprintf("the head at seq %d", rep.LastSeq)}
			rep.VerifiedThrough = min(rep.VerifiedThrough, rep.LastSeq)
			r.cfg.Metrics.Count(keys.MetricChainBreaks, 1, "Mode", string(rep.Mode))
		}
		r.log.ErrorContext(ctx, "chain rolled back below a delivery watermark", slog.String(obs.KeySubscription, sd.Subscription),
			slog.Int64(obs.KeyWatermark, sd.Watermark), slog.Int64(obs.KeyLastSeq, rep.LastSeq), slog.String(obs.KeyReason, string(ReasonRollback)))
	}
}
