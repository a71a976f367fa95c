package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

const effectsSynopsis = "[-table NAME -state-table NAME | -stack NAME [-backbone ID] | -local] [-tenant T] [-redo KEY | -done KEY] [-json]"

// runEffects lists the effects of unknown outcome (pkg/effect: an AtMostOnce
// effect whose delivery died between recording and finishing it) that dead
// letters hold, or records an operator's decision on one.
func runEffects(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("effects", effectsSynopsis, stderr)
	table := fs.String("table", os.Getenv(keys.EnvEventsTable), "the events table, to list every tenant (default $"+keys.EnvEventsTable+"; the stack output EventsTableName)")
	stateTable := fs.String("state-table", os.Getenv(keys.EnvStateTable), "the state table (default $"+keys.EnvStateTable+"; the stack output "+keys.OutputStateTable+")")
	local := fs.Bool("local", false, "the tables of the twin 'fourlanes dev' is running")
	stack := fs.String("stack", "", stackHelp+" (EventsTableName, StateTableName)")
	fs.String(backboneFlag, "", backboneHelp)
	tenant := fs.String("tenant", "", "only this tenant (every chain of a tenant with chain shards), or only this chain (<tenant>~<k>)")
	asJSON := fs.Bool("json", false, "one JSON object per effect instead of a table (with -redo or -done, one object for the decision)")
	redo := fs.String("redo", "", "decide that the effect KEY did not happen: the next replay of its dead letter (dlq-repair) does it")
	done := fs.String("done", "", "decide that the effect KEY happened: the next replay of its dead letter completes without doing it")
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
	if *redo != "" && *done != "" {
		return 0, fmt.Errorf("%w: -redo and -done are two decisions on one effect; pass one", ErrUsage)
	}
	if *tenant != "" {
		if err := tenancy.CheckChain(*tenant); err != nil {
			return 0, fmt.Errorf("%w: -tenant: %v", ErrUsage, err)
		}
	}
	endpoint, err := resolveTables(ctx, fs, *stack, *local,
		tableFlag{"table", table, keys.OutputEventsTable}, tableFlag{"state-table", stateTable, keys.OutputStateTable})
	if err != nil {
		return 0, err
	}
	if *stateTable == "" || (*redo == "" && *done == "" && *table == "") {
		return 0, fmt.Errorf("%w: pass -table and -state-table (the stack outputs EventsTableName and %s), -stack NAME, set $%s and $%s, or -local",
			ErrUsage, keys.OutputStateTable, keys.EnvEventsTable, keys.EnvStateTable)
	}
	db, err := dynamoDB(ctx, fs, endpoint)
	if err != nil {
		return 0, err
	}
	effects := effect.NewDynamoStore(db, *stateTable)
	if decision, k := decisionOf(*redo, *done); decision != "" {
		key, err := effect.ParseKey(k)
		if err != nil {
			return 0, fmt.Errorf("%w: -%s: %v", ErrUsage, decision, err)
		}
		now := time.Now()
		r, err := effects.Decide(ctx, key, decision, now, now.Add(30*24*time.Hour))
		if err != nil {
			return 0, err
		}
		if *asJSON {
			return ExitOK, json.NewEncoder(stdout).Encode(decidedEffect{Key: key.String(), Tenant: r.Tenant, Seq: r.Seq, Status: string(r.Status)})
		}
		fmt.Fprintf(stdout, "effect %s of tenant %s seq %d: %s. The next replay of its dead letter (dlq-repair's schedule, or `fourlanes repair` now) %s.\n",
			key, r.Tenant, r.Seq, r.Status, map[effect.Status]string{effect.StatusRedo: "does it", effect.StatusDone: "completes without doing it"}[r.Status])
		return ExitOK, nil
	}
	log, err := eventstore.New(db, eventstore.Config{Table: *table})
	if err != nil {
		return 0, err
	}
	w := &watermarkTool{log: log}
	return listEffects(ctx, w, delivery.NewDynamoStore(db, *stateTable), effects, *tenant, *asJSON, stdout)
}

// decidedEffect is what -redo and -done print with -json.
type decidedEffect struct {
	Key    string `json:"key"`
	Tenant string `json:"tenant"`
	Seq    int64  `json:"seq"`
	Status string `json:"status"` // redo or done
}

func decisionOf(redo, done string) (effect.Status, string) {
	switch {
	case redo != "":
		return effect.StatusRedo, redo
	case done != "":
		return effect.StatusDone, done
	}
	return "", ""
}

// unknownEffect is one line of the listing.
type unknownEffect struct {
	Tenant       string `json:"tenant"`
	Subscription string `json:"subscription"`
	Seq          int64  `json:"seq"`
	Type         string `json:"type"`
	Key          string `json:"key"`
	Status       string `json:"status"` // the effect record's: unknown, or redo/done once decided
	DeadAt       string `json:"dead_at"`
	Error        string `json:"error"`
}

// listEffects prints every dead letter of the tenants (each chain) whose
// effect awaits a decision, and exits ExitFinding when there is any.
func listEffects(ctx context.Context, w *watermarkTool, letters *delivery.DynamoStore, effects *effect.DynamoStore, tenant string, asJSON bool, stdout io.Writer) (int, error) {
	var found []unknownEffect
	err := w.each(ctx, tenant, func(chain string) error {
		cursor := ""
		for {
			dls, next, err := letters.DeadLetters(ctx, chain, cursor, 100)
			if err != nil {
				return err
			}
			for _, d := range dls {
				if d.Effect == "" {
					continue
				}
				u := unknownEffect{Tenant: d.Tenant, Subscription: d.Subscription, Seq: d.Seq, Type: d.Type, Key: d.Effect,
					DeadAt: d.DeadAt.UTC().Format(time.RFC3339), Error: d.Error}
				if k, err := effect.ParseKey(d.Effect); err == nil {
					if r, ok, err := effects.Get(ctx, k); err != nil {
						return err
					} else if ok {
						u.Status = string(r.Status)
					}
				}
				found = append(found, u)
			}
			if next == "" {
				return nil
			}
			cursor = next
		}
	})
	if err != nil {
		return 0, err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, u := range found {
			if err := enc.Encode(u); err != nil {
				return 0, err
			}
		}
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tSUBSCRIPTION\tSEQ\tTYPE\tEFFECT KEY\tSTATUS\tDEAD AT")
		for _, u := range found {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", u.Tenant, u.Subscription, u.Seq, u.Type, u.Key, u.Status, u.DeadAt)
		}
		if err := tw.Flush(); err != nil {
			return 0, err
		}
	}
	if len(found) > 0 {
		return ExitFinding, nil
	}
	return ExitOK, nil
}
