package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

const watermarksSynopsis = "[-table NAME -state-table NAME | -stack NAME [-backbone ID] | -local] [-tenant T] [-set-to-head (-tenant T | -all) -yes] [-json]"

func runWatermarks(ctx context.Context, a *app.Application, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("watermarks", watermarksSynopsis, stderr)
	table := fs.String("table", os.Getenv(keys.EnvEventsTable), "the events table (default $"+keys.EnvEventsTable+"; the stack output EventsTableName)")
	stateTable := fs.String("state-table", os.Getenv(keys.EnvStateTable), "the state table (default $"+keys.EnvStateTable+"; the stack output "+keys.OutputStateTable+")")
	local := fs.Bool("local", false, "the tables of the twin 'fourlanes dev' is running")
	stack := fs.String("stack", "", stackHelp+" (EventsTableName, StateTableName)")
	fs.String(backboneFlag, "", backboneHelp)
	tenant := fs.String("tenant", "", "only this tenant (every chain of a tenant with chain shards), or only this chain (<tenant>~<k>)")
	asJSON := fs.Bool("json", false, "one JSON object per line instead of a table: per chain and subscription, its watermark (or with -set-to-head, what was done)")
	all := fs.Bool("all", false, "with -set-to-head: every tenant")
	setToHead := fs.Bool("set-to-head", false, "declare every event through each tenant's head settled for every DURABLE subscription: "+
		"for a stack upgraded to delivery watermarks, whose earlier deliveries left none (reconcile would report them unsettled from seq 1)")
	yes := fs.Bool("yes", false, "with -set-to-head: do it (without -yes it refuses)")
	addAWSFlags(fs)
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if err := checkLocal(fs, *local); err != nil {
		return 0, err
	}
	if *tenant != "" {
		if err := tenancy.CheckChain(*tenant); err != nil {
			return 0, fmt.Errorf("%w: -tenant: %v", ErrUsage, err)
		}
	}
	switch {
	case *all && !*setToHead:
		return 0, fmt.Errorf("%w: -all applies to -set-to-head; listing covers every tenant unless -tenant", ErrUsage)
	case *setToHead && (*tenant == "") == !*all:
		return 0, fmt.Errorf("%w: -set-to-head needs exactly one of -tenant T and -all", ErrUsage)
	case *setToHead && !*yes:
		return 0, fmt.Errorf("%w: refusing -set-to-head without -yes: it declares every event through the head settled, "+
			"so an event that was never delivered would no longer show as unsettled; run without -set-to-head first to see the watermarks", ErrUsage)
	case *yes && !*setToHead:
		return 0, fmt.Errorf("%w: -yes applies to -set-to-head only", ErrUsage)
	}
	cat, err := catalogOf(a, "watermarks")
	if err != nil {
		return 0, err
	}
	so, err := openStack(ctx, fs, *stack, *local)
	if err != nil {
		return 0, err
	}
	if err := so.fill("table", table, keys.OutputEventsTable); err != nil {
		return 0, err
	}
	if err := so.fill("state-table", stateTable, keys.OutputStateTable); err != nil {
		return 0, err
	}
	var endpoint string
	if *local {
		st, err := readState()
		if err != nil {
			return 0, err
		}
		*table, *stateTable, endpoint = st.EventsTable, st.Outputs[keys.OutputStateTable], st.DynamoDBEndpoint
	}
	if *table == "" || *stateTable == "" {
		return 0, fmt.Errorf("%w: pass -table and -state-table (the stack outputs EventsTableName and %s), -stack NAME, set $%s and $%s, or -local",
			ErrUsage, keys.OutputStateTable, keys.EnvEventsTable, keys.EnvStateTable)
	}
	db, err := dynamoDB(ctx, fs, endpoint)
	if err != nil {
		return 0, err
	}
	w, err := newWatermarkTool(db, cat, *table, *stateTable)
	if err != nil {
		return 0, err
	}
	if *setToHead {
		return w.setToHead(ctx, *tenant, *asJSON, stdout)
	}
	return w.list(ctx, *tenant, *asJSON, stdout)
}

// watermarkTool lists and sets delivery watermarks (pkg/delivery) of the
// application's DURABLE subscriptions against each tenant's head.
type watermarkTool struct {
	log   *eventstore.Store
	marks *delivery.DynamoStore
	carry *delivery.WatermarkReader // derives each watermark from its checkpoint
	subs  []string
	now   func() time.Time
}

func newWatermarkTool(db *dynamodb.Client, cat *catalog.Catalog, eventsTable, stateTable string) (*watermarkTool, error) {
	log, err := eventstore.New(db, eventstore.Config{Table: eventsTable, Catalog: cat})
	if err != nil {
		return nil, err
	}
	subs := delivery.DurableSubscriptions(cat)
	if len(subs) == 0 {
		return nil, errors.New("the catalog declares no DURABLE subscription: there are no watermarks")
	}
	marks := delivery.NewDynamoStore(db, stateTable)
	carry, err := delivery.NewWatermarkReader(marks.WithLog(eventsTable), cat)
	if err != nil {
		return nil, err
	}
	return &watermarkTool{log: log, marks: marks, carry: carry, subs: subs, now: time.Now}, nil
}

// each calls f for tenant's chains (tenant's own, then its chain shards'
// with a head row; a chain's name: that chain), or for every chain with a
// head row. Watermarks, like heads, are per chain.
func (w *watermarkTool) each(ctx context.Context, tenant string, f func(chain string) error) error {
	if tenant != "" {
		chains, err := w.log.ChainsOf(ctx, tenant)
		if err != nil {
			return err
		}
		for _, c := range chains {
			if err := f(c); err != nil {
				return err
			}
		}
		return nil
	}
	cursor := ""
	for {
		ts, next, err := w.log.Tenants(ctx, cursor, 0)
		if err != nil {
			return err
		}
		for _, t := range ts {
			if err := f(t); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// watermarkLine is one line of the listing; with -json, one object.
type watermarkLine struct {
	Tenant         string `json:"tenant"` // the chain: a tenant, or a chain shard <tenant>~<k>
	Subscription   string `json:"subscription"`
	Watermark      int64  `json:"watermark"`
	Head           int64  `json:"head"`
	Behind         int64  `json:"behind"`
	EffectsUnknown int    `json:"effects_unknown"`
	UpdatedAt      string `json:"updated_at,omitempty"` // RFC 3339; absent: no watermark yet
}

// list prints one line per (tenant, DURABLE subscription): its watermark,
// the head, and how many events lie between.
func (w *watermarkTool) list(ctx context.Context, tenant string, asJSON bool, stdout io.Writer) (int, error) {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	enc := json.NewEncoder(stdout)
	if !asJSON {
		fmt.Fprintln(tw, "TENANT\tSUBSCRIPTION\tWATERMARK\tHEAD\tBEHIND\tEFFECTS UNKNOWN\tUPDATED")
	}
	err := w.each(ctx, tenant, func(t string) error {
		head, err := w.log.Head(ctx, t)
		if err != nil {
			return err
		}
		last := int64(0)
		if head != nil {
			last = head.LastSeq
		}
		marks, err := w.marks.Watermarks(ctx, t)
		if err != nil {
			return err
		}
		// The consumer writes no watermark: each is its checkpoint carried
		// forward over the settled claims after it.
		from := map[string]int64{}
		for _, sub := range w.subs {
			from[sub] = marks[sub].Seq
		}
		c, err := w.carry.Carry(ctx, t, from, last)
		if err != nil {
			return err
		}
		unknown, err := w.unknownEffects(ctx, t)
		if err != nil {
			return err
		}
		for _, sub := range delivery.ForChain(w.subs, t) {
			m, ok := marks[sub]
			m.Seq = max(m.Seq, c.Seqs[sub])
			l := watermarkLine{Tenant: t, Subscription: sub, Watermark: m.Seq, Head: last, Behind: max(0, last-m.Seq), EffectsUnknown: unknown[sub]}
			if ok {
				l.UpdatedAt = m.UpdatedAt.UTC().Format(time.RFC3339)
			}
			if asJSON {
				if err := enc.Encode(l); err != nil {
					return err
				}
				continue
			}
			updated := l.UpdatedAt
			if updated == "" {
				updated = "(none)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", l.Tenant, l.Subscription, l.Watermark, l.Head, l.Behind, l.EffectsUnknown, updated)
		}
		return nil
	})
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return 0, err
	}
	return ExitOK, nil
}

// unknownEffects counts, per subscription, the chain's dead letters whose
// effect awaits a decision (pkg/effect): below the watermark, yet not
// settled until `fourlanes effects` decides them.
func (w *watermarkTool) unknownEffects(ctx context.Context, chain string) (map[string]int, error) {
	out := map[string]int{}
	cursor := ""
	for {
		dls, next, err := w.marks.DeadLetters(ctx, chain, cursor, 100)
		if err != nil {
			return nil, err
		}
		for _, d := range dls {
			if d.Effect != "" {
				out[d.Subscription]++
			}
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// setLine is what -set-to-head did to one chain's watermark of one
// subscription; with -json, one object. Outcome is one of the outcome*
// constants.
type setLine struct {
	Tenant       string `json:"tenant"`
	Subscription string `json:"subscription,omitempty"` // empty for a chain without events
	From         int64  `json:"from"`
	To           int64  `json:"to"`
	Outcome      string `json:"outcome"`
}

// Outcomes of -set-to-head.
const (
	outcomeSet      = "set"       // moved to the head
	outcomeAtHead   = "at_head"   // already there
	outcomeMoved    = "moved"     // reconcile or dlq-repair moved it meanwhile: unchanged
	outcomeNoEvents = "no_events" // the chain has none
)

// setToHead moves each watermark's checkpoint below the head up to it, with
// the same conditional write reconcile and dlq-repair use: a checkpoint one
// of them moved meanwhile is left as it is, and said so.
func (w *watermarkTool) setToHead(ctx context.Context, tenant string, asJSON bool, stdout io.Writer) (int, error) {
	changed := 0
	enc := json.NewEncoder(stdout)
	say := func(l setLine) error {
		if asJSON {
			return enc.Encode(l)
		}
		switch l.Outcome {
		case outcomeNoEvents:
			fmt.Fprintf(stdout, "%s: no events; nothing to set\n", l.Tenant)
		case outcomeAtHead:
			fmt.Fprintf(stdout, "%s %s: watermark %d, already at the head %d; unchanged\n", l.Tenant, l.Subscription, l.From, l.To)
		case outcomeMoved:
			fmt.Fprintf(stdout, "%s %s: watermark moved from %d while this ran (reconcile or dlq-repair wrote it); unchanged, run again to see it\n", l.Tenant, l.Subscription, l.From)
		case outcomeSet:
			fmt.Fprintf(stdout, "%s %s: watermark %d -> %d (the head)\n", l.Tenant, l.Subscription, l.From, l.To)
		}
		return nil
	}
	err := w.each(ctx, tenant, func(t string) error {
		head, err := w.log.Head(ctx, t)
		if err != nil {
			return err
		}
		if head == nil || head.LastSeq == 0 {
			return say(setLine{Tenant: t, Outcome: outcomeNoEvents})
		}
		marks, err := w.marks.Watermarks(ctx, t)
		if err != nil {
			return err
		}
		for _, sub := range delivery.ForChain(w.subs, t) {
			l := setLine{Tenant: t, Subscription: sub, From: marks[sub].Seq, To: head.LastSeq}
			switch {
			case l.From >= head.LastSeq:
				l.Outcome = outcomeAtHead
			default:
				moved, err := w.marks.Advance(ctx, t, sub, l.From+1, head.LastSeq, w.now())
				if err != nil {
					return err
				}
				l.Outcome = outcomeMoved
				if moved {
					l.Outcome = outcomeSet
					changed++
				}
			}
			if err := say(l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if !asJSON {
		fmt.Fprintf(stdout, "%d watermark(s) set to the head\n", changed)
	}
	return ExitOK, nil
}
