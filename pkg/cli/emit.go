package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/erasure"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

const emitSynopsis = "-tenant T -type TYPE -payload (JSON | @FILE | @-) [-shard-key K] [-table NAME | -stack NAME [-backbone ID] | -local] [-json]"

func runEmit(ctx context.Context, a *app.Application, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("emit", emitSynopsis, stderr)
	tenant := fs.String("tenant", "", "the tenant (required)")
	typ := fs.String("type", "", "the event type, one the application declares (required)")
	payload := fs.String("payload", "", "the payload, a JSON object fitting the type's current schema (required): inline, or @FILE to read it from FILE, @- from stdin")
	table := fs.String("table", os.Getenv(keys.EnvEventsTable), "the events table (default $"+keys.EnvEventsTable+"; the stack output EventsTableName)")
	actor := fs.String("actor", "fourlanes-cli", "the actor recorded on the event")
	shardKey := fs.String("shard-key", "", "the id of the aggregate the event is about; required for a tenant with chain shards (the application's ChainShards), which it picks the chain of")
	local := fs.Bool("local", false, "append to the twin 'fourlanes dev' is running")
	stack := fs.String("stack", "", stackHelp+" (EventsTableName)")
	fs.String(backboneFlag, "", backboneHelp)
	asJSON := fs.Bool("json", false, "print the appended event (its envelope) on one line instead of indented; the members are the same")
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
	if *tenant == "" || *typ == "" || *payload == "" {
		return 0, fmt.Errorf("%w: -tenant, -type and -payload are required", ErrUsage)
	}
	cat, err := catalogOf(a, "emit")
	if err != nil {
		return 0, err
	}
	if _, _, ok := cat.Type(*typ); !ok {
		return 0, fmt.Errorf("%w: -type %q: the application declares no such event type; emit appends one of %s", ErrUsage, *typ, strings.Join(cat.TypeNames(), ", "))
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
	tctx, err := tenancy.WithTenant(ctx, *tenant)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if cat.Personal() {
		if err := useVault(ctx, fs, so, cat, *local); err != nil {
			return 0, err
		}
	}
	store, err := openStore(ctx, fs, eventstore.Config{Catalog: cat, Shards: a.ChainShards}, *table, *local)
	if err != nil {
		return 0, err
	}
	tctx = tenancy.WithActor(tctx, *actor)
	ctx, cancel := context.WithTimeout(tctx, 30*time.Second)
	defer cancel()
	e, err := store.EmitWith(ctx, eventstore.EmitInput{Type: *typ, Payload: p, ShardKey: *shardKey})
	if errors.Is(err, eventstore.ErrNoShardKey) {
		// The store's rule (the application's ChainShards), said as the flag to pass.
		return 0, fmt.Errorf("%w: -shard-key is required, the id of the aggregate the event is about: %v", ErrUsage, err)
	}
	if err != nil {
		return 0, err
	}
	var b []byte
	if *asJSON {
		b, err = json.Marshal(e)
	} else {
		b, err = json.MarshalIndent(e, "", "  ")
	}
	if err != nil {
		return 0, err
	}
	fmt.Fprintln(stdout, string(b))
	return ExitOK, nil
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
			return nil, fmt.Errorf("%w: -payload @: want @FILE, or @- for stdin", ErrUsage)
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
		return nil, fmt.Errorf("%w: %s is not a JSON object: %v", ErrUsage, what, err)
	}
	// encoding/json above keeps the last of repeated members and turns bad
	// text into U+FFFD; the store must see the text as written, so that what
	// a verifier would refuse is refused here, naming the field.
	if _, err := envelope.NormalizePayload(json.RawMessage(b)); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUsage, what, err)
	}
	return p, nil
}

// openStore opens the events table for the CLI (cfg.Catalog nil for a reader): table in AWS with the
// default credentials (or those of --profile of fs), or with local the table
// of the twin 'fourlanes dev' is running; cfg.Table is set from one of them.
func openStore(ctx context.Context, fs *flag.FlagSet, cfg eventstore.Config, table string, local bool) (*eventstore.Store, error) {
	var endpoint string
	if local {
		st, err := readState()
		if err != nil {
			return nil, err
		}
		table, endpoint = st.EventsTable, st.DynamoDBEndpoint
	}
	if table == "" {
		return nil, fmt.Errorf("%w: no events table: pass -table (the stack output EventsTableName), -stack NAME, set $%s, or -local", ErrUsage, keys.EnvEventsTable)
	}
	db, err := dynamoDB(ctx, fs, endpoint)
	if err != nil {
		return nil, err
	}
	cfg.Table = table
	return eventstore.New(db, cfg)
}

// useVault gives cat the stack's vault (pkg/erasure), for an application
// whose catalog declares personal fields: the subject-keys table and data key
// from -stack's outputs, $SUBJECT_KEYS_TABLE and $DATA_KEY_ID, or -local's
// twin (with its KMS).
func useVault(ctx context.Context, fs *flag.FlagSet, so *stackOutputs, cat *catalog.Catalog, local bool) error {
	keysTable, dataKey := os.Getenv(keys.EnvSubjectKeysTable), os.Getenv(keys.EnvDataKeyID)
	if err := so.fill("subject-keys table", &keysTable, keys.OutputSubjectKeysTable); err != nil {
		return err
	}
	if err := so.fill("data key", &dataKey, keys.OutputDataKey); err != nil {
		return err
	}
	var ddbEndpoint, kmsEndpoint string
	if local {
		st, err := readState()
		if err != nil {
			return err
		}
		keysTable, dataKey = st.Outputs[keys.OutputSubjectKeysTable], st.Outputs[keys.OutputDataKey]
		ddbEndpoint, kmsEndpoint = st.DynamoDBEndpoint, st.KMSEndpoint
	}
	if keysTable == "" || dataKey == "" {
		return fmt.Errorf("%w: the catalog declares personal fields, which emit seals: pass -stack NAME (outputs %s, %s), set $%s and $%s, or -local",
			ErrUsage, keys.OutputSubjectKeysTable, keys.OutputDataKey, keys.EnvSubjectKeysTable, keys.EnvDataKeyID)
	}
	db, err := dynamoDB(ctx, fs, ddbEndpoint)
	if err != nil {
		return err
	}
	cfg, err := awsConfig(ctx, fs, local)
	if err != nil {
		return err
	}
	kc := kms.NewFromConfig(cfg, func(o *kms.Options) {
		if kmsEndpoint != "" {
			o.BaseEndpoint = &kmsEndpoint
		}
	})
	v, err := erasure.New(db, kc, erasure.Config{Table: keysTable, KeyID: dataKey})
	if err != nil {
		return err
	}
	cat.UseVault(v)
	return nil
}
