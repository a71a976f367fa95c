package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

const deadlettersSynopsis = "[-state-table NAME [-table NAME] | -stack NAME [-backbone ID] | -local] [-tenant T] [-subscription S] [-resolved] [-json] | -release -tenant T -subscription S -event ID"

// deadLetterRow is one line of the listing.
type deadLetterRow struct {
	Tenant       string `json:"tenant"`
	Seq          int64  `json:"seq"`
	EventID      string `json:"event_id"`
	Type         string `json:"type"`
	Subscription string `json:"subscription"`
	DeadAt       string `json:"dead_at"`
	Attempts     int    `json:"attempts"`
	Replays      int    `json:"replays"`
	Error        string `json:"error"`
	Effect       string `json:"effect,omitempty"`
	ResolvedAt   string `json:"resolved_at,omitempty"`
	ResolvedBy   string `json:"resolved_by,omitempty"`
	How          string `json:"how,omitempty"`
	ExpiresAt    string `json:"expires_at,omitempty"`
}

func runDeadLetters(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("deadletters", deadlettersSynopsis, stderr)
	stateTable := fs.String("state-table", os.Getenv(keys.EnvStateTable), "the state table (default $"+keys.EnvStateTable+"; the stack output "+keys.OutputStateTable+")")
	table := fs.String("table", os.Getenv(keys.EnvEventsTable), "the events table, for -resolved without -tenant (default $"+keys.EnvEventsTable+"; the stack output EventsTableName)")
	local := fs.Bool("local", false, "the tables of the twin 'fourlanes dev' is running")
	stack := fs.String("stack", "", stackHelp+" (StateTableName, EventsTableName)")
	fs.String(backboneFlag, "", backboneHelp)
	tenant := fs.String("tenant", "", "only this tenant (default: every tenant with dead letters, from the dead-letter index; with -resolved, every tenant of the log)")
	sub := fs.String("subscription", "", "only this subscription")
	resolved := fs.Bool("resolved", false, fmt.Sprintf("list resolved dead letters (kept %d days: who, when, how) instead of open ones", keys.DeadLetterHistoryDays))
	asJSON := fs.Bool("json", false, "one JSON object per line instead of a table")
	release := fs.Bool("release", false, "take one quarantined event (-tenant, -subscription, -event) off the quarantine: the next dlq-repair run replays its dead letter, with a fresh backoff and cap")
	eventID := fs.String("event", "", "with -release: the event id")
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
	if *release {
		var missing []string
		for name, v := range map[string]string{"-tenant": *tenant, "-subscription": *sub, "-event": *eventID} {
			if v == "" {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return 0, fmt.Errorf("%w: -release takes one quarantined event: pass %s (fourlanes deadletters lists them)", ErrUsage, strings.Join(missing, ", "))
		}
		if *resolved || *asJSON {
			return 0, fmt.Errorf("%w: -release does not list: drop -resolved and -json", ErrUsage)
		}
	} else if *eventID != "" {
		return 0, fmt.Errorf("%w: -event applies to -release only", ErrUsage)
	}
	if *tenant != "" {
		if err := tenancy.CheckChain(*tenant); err != nil {
			return 0, fmt.Errorf("%w: -tenant: %v", ErrUsage, err)
		}
	}
	endpoint, err := resolveTables(ctx, fs, *stack, *local,
		tableFlag{"state-table", stateTable, keys.OutputStateTable}, tableFlag{"table", table, keys.OutputEventsTable})
	if err != nil {
		return 0, err
	}
	if *stateTable == "" {
		return 0, fmt.Errorf("%w: pass -state-table (the stack output %s), -stack NAME, set $%s, or -local", ErrUsage, keys.OutputStateTable, keys.EnvStateTable)
	}
	if *resolved && *tenant == "" && *table == "" {
		return 0, fmt.Errorf("%w: -resolved without -tenant reads the tenants from the events table: pass -table (the stack output EventsTableName) or -tenant T", ErrUsage)
	}
	db, err := dynamoDB(ctx, fs, endpoint)
	if err != nil {
		return 0, err
	}
	store := delivery.NewDynamoStore(db, *stateTable)
	if *release {
		return releaseDeadLetter(ctx, store, *tenant, *sub, *eventID, stdout)
	}
	tenants := func(yield func(string) error) error {
		if *tenant != "" {
			return yield(*tenant)
		}
		cursor := ""
		for {
			var ts []string
			var next string
			var err error
			if *resolved {
				var log *eventstore.Store
				if log, err = eventstore.New(db, eventstore.Config{Table: *table}); err != nil {
					return err
				}
				ts, next, err = log.Tenants(ctx, cursor, 0)
			} else {
				ts, next, err = store.DeadLetterTenants(ctx, cursor, 100)
			}
			if err != nil {
				return err
			}
			for _, t := range ts {
				if err := yield(t); err != nil {
					return err
				}
			}
			if next == "" {
				return nil
			}
			cursor = next
		}
	}
	var rows []deadLetterRow
	err = tenants(func(t string) error {
		cursor := ""
		for {
			var page []deadLetterRow
			var next string
			if *resolved {
				rs, n, err := store.ResolvedDeadLetters(ctx, t, cursor, 100)
				if err != nil {
					return err
				}
				for _, r := range rs {
					row := rowOf(r.DeadLetter)
					row.ResolvedAt, row.ResolvedBy, row.How, row.ExpiresAt = stamp(r.ResolvedAt), r.ResolvedBy, r.How, stamp(r.ExpiresAt)
					page = append(page, row)
				}
				next = n
			} else {
				dls, n, err := store.DeadLetters(ctx, t, cursor, 100)
				if err != nil {
					return err
				}
				for _, dl := range dls {
					page = append(page, rowOf(dl))
				}
				next = n
			}
			for _, r := range page {
				if *sub == "" || r.Subscription == *sub {
					rows = append(rows, r)
				}
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
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return 0, err
			}
		}
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		if *resolved {
			fmt.Fprintln(tw, "TENANT\tSEQ\tSUBSCRIPTION\tTYPE\tDEAD AT\tREPLAYS\tRESOLVED AT\tBY\tHOW\tERROR")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Tenant, r.Seq, r.Subscription, r.Type, r.DeadAt, r.Replays, r.ResolvedAt, r.ResolvedBy, r.How, r.Error)
			}
		} else {
			fmt.Fprintln(tw, "TENANT\tSEQ\tSUBSCRIPTION\tTYPE\tDEAD AT\tREPLAYS\tERROR")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\n", r.Tenant, r.Seq, r.Subscription, r.Type, r.DeadAt, r.Replays, r.Error)
			}
		}
		if err := tw.Flush(); err != nil {
			return 0, err
		}
	}
	if !*resolved && len(rows) > 0 {
		fmt.Fprintf(stderr, "fourlanes deadletters: %d open (fourlanes repair replays them)\n", len(rows))
		return ExitFinding, nil
	}
	return ExitOK, nil
}

func rowOf(dl delivery.DeadLetter) deadLetterRow {
	return deadLetterRow{Tenant: dl.Tenant, Seq: dl.Seq, EventID: dl.EventID, Type: dl.Type, Subscription: dl.Subscription,
		DeadAt: stamp(dl.DeadAt), Attempts: dl.Attempts, Replays: dl.Replays, Error: dl.Error, Effect: dl.Effect}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// releaseDeadLetter takes one event off a subscription's quarantine.
func releaseDeadLetter(ctx context.Context, store *delivery.DynamoStore, tenant, sub, eventID string, stdout io.Writer) (int, error) {
	r, err := store.Release(ctx, tenant, sub, eventID)
	if errors.Is(err, delivery.ErrNotQuarantined) {
		return 0, fmt.Errorf("%w: event %s of tenant %s is not quarantined for %s (fourlanes deadletters -tenant %s -subscription %s lists its dead letters)",
			ErrUsage, eventID, tenant, sub, tenant, sub)
	}
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "released event %s (seq %d) of tenant %s for %s from quarantine (quarantined %s: %s)\n",
		eventID, r.Quarantined.Seq, tenant, sub, stamp(r.Quarantined.At), r.Quarantined.Reason)
	if r.DeadLetter {
		fmt.Fprintf(stdout, "its dead letter's failed replays were reset from %d to 0: the next dlq-repair run replays it (fourlanes repair runs one now)\n", r.Replays)
	} else {
		fmt.Fprintln(stdout, "it has no open dead letter for this subscription: a backfill no longer passes over it")
	}
	return ExitOK, nil
}
