package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

func runEmit(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flags("emit", "emit -tenant T -type TYPE -payload (JSON | @FILE | @-) [-table NAME | -stack NAME | -local]", stderr)
	tenant := fs.String("tenant", "", "the tenant (required)")
	typ := fs.String("type", "", "the event type, declared in the example catalog, e.g. order.paid (required)")
	payload := fs.String("payload", "", "the payload, a JSON object fitting the type's current schema (required): inline, or @FILE to read it from FILE, @- from stdin")
	table := fs.String("table", os.Getenv(keys.EnvEventsTable), "the events table (default $"+keys.EnvEventsTable+"; the stack output EventsTableName)")
	actor := fs.String("actor", "fourlanes-cli", "the actor recorded on the event")
	local := fs.Bool("local", false, "append to the twin `fourlanes dev` is running")
	stack := fs.String("stack", "", stackHelp+" (EventsTableName)")
	if err := parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *tenant == "" || *typ == "" || *payload == "" {
		return 0, fmt.Errorf("%w: -tenant, -type and -payload are required", errUsage)
	}
	if !slices.Contains(emittable, *typ) {
		return 0, fmt.Errorf("%w: -type %q: emit appends the example's declared types: %s", errUsage, *typ, strings.Join(emittable, ", "))
	}
	p, err := readPayload(*payload, os.Stdin)
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
	store, err := openStore(ctx, *table, *local)
	if err != nil {
		return 0, err
	}
	tctx, err := tenancy.WithTenant(ctx, *tenant)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errUsage, err)
	}
	tctx = tenancy.WithActor(tctx, *actor)
	ctx, cancel := context.WithTimeout(tctx, 30*time.Second)
	defer cancel()
	e, err := emitDeclared(ctx, store, *typ, p)
	if err != nil {
		return 0, err
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return 0, err
	}
	fmt.Fprintln(stdout, string(b))
	return exitOK, nil
}

// readPayload reads -payload: inline JSON, or as curl does, @FILE the
// contents of FILE and @- stdin. It must hold one JSON object; numbers stay
// json.Number, so the envelope keeps their digits.
func readPayload(arg string, stdin io.Reader) (map[string]any, error) {
	what, b := "-payload", []byte(arg)
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		switch name {
		case "":
			return nil, fmt.Errorf("%w: -payload @: want @FILE, or @- for stdin", errUsage)
		case "-":
			what = "-payload @- (stdin)"
			b, err = io.ReadAll(stdin)
		default:
			what = "-payload @" + name
			b, err = os.ReadFile(name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: cannot read the payload: %w", what, err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var p map[string]any
	err := dec.Decode(&p)
	if err == nil && p == nil {
		err = errors.New("null")
	}
	if err == nil {
		if _, end := dec.Token(); end != io.EOF {
			err = errors.New("more after the object")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a JSON object: %v", errUsage, what, err)
	}
	return p, nil
}

// emitDeclared emits p as typ, one of the example application's declared
// types. Each Emit names its type constant, so the catalog gate checks this
// command like any other producer (a main package is never counted as one).
func emitDeclared(ctx context.Context, store *eventstore.Store, typ string, p map[string]any) (envelope.Envelope, error) {
	switch typ {
	case orders.TypePlaced:
		return store.Emit(ctx, orders.TypePlaced, p)
	case orders.TypePaid:
		return store.Emit(ctx, orders.TypePaid, p)
	case orders.TypeShipped:
		return store.Emit(ctx, orders.TypeShipped, p)
	case orders.TypeCancelled:
		return store.Emit(ctx, orders.TypeCancelled, p)
	}
	return envelope.Envelope{}, fmt.Errorf("%w: -type %q: emit appends the example's declared types: %s", errUsage, typ, strings.Join(emittable, ", "))
}

// emittable are the types emitDeclared knows.
var emittable = []string{orders.TypePlaced, orders.TypePaid, orders.TypeShipped, orders.TypeCancelled}

// openStore opens the events table for the CLI: table in AWS with the
// default credentials, or with local the table of the twin `fourlanes dev`
// is running.
func openStore(ctx context.Context, table string, local bool) (*eventstore.Store, error) {
	var opts []func(*config.LoadOptions) error
	var endpoint string
	if local {
		st, err := readState()
		if err != nil {
			return nil, err
		}
		table, endpoint = st.EventsTable, st.DynamoDBEndpoint
		opts = append(opts, config.WithRegion("us-east-1"), config.WithCredentialsProvider(localCreds{}))
	}
	if table == "" {
		return nil, fmt.Errorf("%w: no events table: pass -table (the stack output EventsTableName), -stack NAME, set $%s, or -local", errUsage, keys.EnvEventsTable)
	}
	cat, err := example.Catalog()
	if err != nil {
		return nil, err
	}
	cfg, err := awsenv.Load(ctx, opts...)
	if err != nil {
		return nil, err
	}
	db := awsenv.DynamoDB(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = &endpoint
		}
	})
	return eventstore.New(db, eventstore.Config{Table: table, Catalog: cat})
}
