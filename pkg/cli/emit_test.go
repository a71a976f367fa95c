package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

const placedPayload = `{"order_id":"%s","customer_email":"zoë@example.com","items":[{"sku":"A-1","qty":2}],"total_cents":1999,"currency":"EUR"}`

// TestEmitPayloadFromFile: `emit -payload @FILE` and `@-` (stdin) append the
// file's object to the log in the local DynamoDB, as inline JSON does.
func TestEmitPayloadFromFile(t *testing.T) {
	db := localaws.DynamoDB(t)
	table := aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	localAWSEnv(t, aws.ToString(db.Options().BaseEndpoint))

	file := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(file, []byte(strings.Replace(placedPayload, "%s", "o-file", 1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdin := filepath.Join(t.TempDir(), "stdin.json")
	if err := os.WriteFile(stdin, []byte(strings.Replace(placedPayload, "%s", "o-stdin", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(stdin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stdin
	os.Stdin = f
	t.Cleanup(func() { os.Stdin = saved })

	for i, c := range []struct{ arg, order string }{{"@" + file, "o-file"}, {"@-", "o-stdin"}} {
		code, out, stderr := runCLI(t, "emit", "-table", table, "-tenant", "acme", "-type", "order.placed", "-payload", c.arg)
		if code != ExitOK {
			t.Fatalf("emit -payload %s: exit %d: %s", c.arg, code, stderr)
		}
		var e envelope.Envelope
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatalf("emit -payload %s: stdout %q: %v", c.arg, out, err)
		}
		if e.Seq != int64(i+1) || e.Payload["order_id"] != c.order || e.Payload["currency"] != "EUR" {
			t.Errorf("emit -payload %s: got seq %d payload %v, want seq %d with order_id %s", c.arg, e.Seq, e.Payload, i+1, c.order)
		}
	}
}

// TestEmitPayloadRefused: a payload that cannot be read or is not one JSON
// object stops emit before it opens the table, naming the flag and the file.
func TestEmitPayloadRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	absent := filepath.Join(dir, "absent.json")
	array := write("array.json", "[1]")
	null := write("null.json", "null")
	two := write("two.json", `{"a":1} {"b":2}`)
	cut := write("cut.json", `{"a":`)
	for _, c := range []struct {
		payload string
		code    int
		want    string
	}{
		{"@" + absent, ExitError, "-payload @" + absent + ": cannot read the payload: open " + absent},
		{"@" + dir, ExitError, "-payload @" + dir + ": cannot read the payload"},
		{"@" + array, ExitUsage, "-payload @" + array + " is not a JSON object"},
		{"@" + null, ExitUsage, "-payload @" + null + " is not a JSON object: null"},
		{"@" + two, ExitUsage, "-payload @" + two + " is not a JSON object: more after the object"},
		{"@" + cut, ExitUsage, "-payload @" + cut + " is not a JSON object: unexpected EOF"},
		{"@", ExitUsage, "want @FILE, or @- for stdin"},
		{`{"a":1} x`, ExitUsage, "-payload is not a JSON object"},
	} {
		code, out, stderr := runCLI(t, "emit", "-table", "no-such-table", "-tenant", "acme", "-type", "order.placed", "-payload", c.payload)
		if code != c.code || !strings.Contains(stderr, c.want) || out != "" {
			t.Errorf("-payload %s: exit %d, stderr %q, stdout %q; want exit %d and %q", c.payload, code, stderr, out, c.code, c.want)
		}
	}
}

// localAWSEnv points the default AWS configuration at a local DynamoDB with
// dummy credentials and no shared files.
func localAWSEnv(t *testing.T, dynamodbEndpoint string) {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodbEndpoint)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "fourlanes")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
}

// TestEmitShardKey: for a tenant the application splits into chain shards,
// emit requires -shard-key (exit 2, nothing written) and appends to the chain
// the key picks; a tenant with one chain needs none.
func TestEmitShardKey(t *testing.T) {
	db := localaws.DynamoDB(t)
	table := aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	localAWSEnv(t, aws.ToString(db.Options().BaseEndpoint))
	a := testApp
	a.ChainShards = map[string]int{"hot": 4}
	emit := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), &a, append([]string{"emit", "-table", table, "-type", "order.placed"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}

	code, _, stderr := emit("-tenant", "hot", "-payload", strings.Replace(placedPayload, "%s", "o-1", 1))
	if code != ExitUsage || !strings.Contains(stderr, "-shard-key is required") || !strings.Contains(stderr, "4 chain shards") {
		t.Fatalf("no -shard-key: exit %d, stderr %q; want exit %d naming -shard-key", code, stderr, ExitUsage)
	}
	store, err := eventstore.New(db, eventstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if ts, _, err := store.Tenants(context.Background(), "", 0); err != nil || len(ts) != 0 {
		t.Fatalf("after the refused emit: chains %v, %v; want none", ts, err)
	}

	for _, order := range []string{"o-1", "o-2", "o-3", "o-1"} {
		code, out, stderr := emit("-tenant", "hot", "-shard-key", order, "-payload", strings.Replace(placedPayload, "%s", order, 1))
		if code != ExitOK {
			t.Fatalf("emit -shard-key %s: exit %d: %s", order, code, stderr)
		}
		var e envelope.Envelope
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatal(err)
		}
		if want := tenancy.Chain("hot", tenancy.ShardOf(order, 4)); e.TenantID != want {
			t.Errorf("emit -shard-key %s: chain %q, want %q", order, e.TenantID, want)
		}
	}
	if code, out, stderr := emit("-tenant", "cold", "-payload", strings.Replace(placedPayload, "%s", "o-9", 1)); code != ExitOK || !strings.Contains(out, `"tenant_id": "cold"`) {
		t.Errorf("a tenant with one chain: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestEmitRefusesWhatTheVerifierRefuses: `emit` refuses a payload with a
// repeated member, invalid UTF-8 or a lone surrogate escape (exit 2, the
// field named) and writes nothing to the table, where encoding/json would
// have stored the last member or U+FFFD.
func TestEmitRefusesWhatTheVerifierRefuses(t *testing.T) {
	db := localaws.DynamoDB(t)
	table := aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	localAWSEnv(t, aws.ToString(db.Options().BaseEndpoint))
	file := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(file, []byte(strings.Replace(placedPayload, "zoë", "zo\xeb", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ payload, want string }{
		{strings.Replace(placedPayload, `"currency":"EUR"`, `"currency":"EUR","currency":"USD"`, 1), "-payload: payload.currency: appears more than once"},
		{"@" + file, "-payload @" + file + ": payload.customer_email: is invalid UTF-8"},
		{strings.Replace(placedPayload, `"sku":"A-1"`, `"sku":"A-\ud800"`, 1), `-payload: payload.items[0].sku: has a lone surrogate \ud800`},
	} {
		code, out, stderr := runCLI(t, "emit", "-table", table, "-tenant", "acme", "-type", "order.placed", "-payload", strings.Replace(c.payload, "%s", "o-1", 1))
		if code != ExitUsage || !strings.Contains(stderr, c.want) || out != "" {
			t.Errorf("-payload %.60s: exit %d, stderr %q, stdout %q; want exit %d and %q", c.payload, code, stderr, out, ExitUsage, c.want)
		}
	}
	items, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil || len(items.Items) != 0 {
		t.Fatalf("table has %d items after refused emits (err %v), want none", len(items.Items), err)
	}
}
