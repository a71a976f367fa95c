package devcli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/cli"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// serveDynamoDB runs `fourlanes dynamodb args...` until stop is called, and returns the
// endpoint it printed. stop cancels the command (as SIGINT does) and returns its exit code.
func serveDynamoDB(t *testing.T, args ...string) (endpoint string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr strings.Builder
	done := make(chan int, 1)
	go func() {
		code := cli.Run(ctx, nil, append([]string{"dynamodb"}, args...), pw, &stderr, Commands(nil)...)
		pw.Close()
		done <- code
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case line := <-lines:
		endpoint, _, _ = strings.Cut(line, " ")
	case code := <-done:
		cancel()
		t.Fatalf("fourlanes dynamodb %v exited %d before printing its endpoint; stderr: %s", args, code, stderr.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("fourlanes dynamodb %v printed no endpoint within 30s", args)
	}
	var once bool
	var code int
	stop = func() int {
		if !once {
			once = true
			cancel()
			code = <-done
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return endpoint, stop
}

func createKeyTable(t *testing.T, db *dynamodb.Client, name string) {
	t.Helper()
	_, err := db.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
}

func TestDynamoDBCommandServesAndStops(t *testing.T) {
	endpoint, stop := serveDynamoDB(t, "-listen", "127.0.0.1:0", "-conflicts", "-partition-wcu", "1000", "-stream-retention", "1h", "-shard-records", "5")
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" {
		t.Fatalf("printed endpoint %q: want http://127.0.0.1:<the real port>", endpoint)
	}
	db := localaws.NewDynamoDB(endpoint)
	name := localaws.UniqueName(t, "tbl")
	createKeyTable(t, db, name)
	out, err := db.ListTables(t.Context(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(out.TableNames); got != fmt.Sprint([]string{name}) {
		t.Errorf("tables: got %v, want [%s]", got, name)
	}

	if code := stop(); code != cli.ExitOK {
		t.Errorf("exit code after the signal: got %d, want %d", code, cli.ExitOK)
	}
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Errorf("still listening on %s after the signal", u.Host)
	}
}

func TestDynamoDBCommandDataSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	endpoint, stop := serveDynamoDB(t, "-listen", "127.0.0.1:0", "-data", dir)
	db := localaws.NewDynamoDB(endpoint)
	name := localaws.UniqueName(t, "tbl")
	createKeyTable(t, db, name)
	key := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "k1"}}
	item := map[string]ddbtypes.AttributeValue{"pk": key["pk"], "v": &ddbtypes.AttributeValueMemberN{Value: "42"}}
	if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(name), Item: item}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if code := stop(); code != cli.ExitOK {
		t.Fatalf("first run: exit %d, want %d", code, cli.ExitOK)
	}

	endpoint, _ = serveDynamoDB(t, "-listen", "127.0.0.1:0", "-data", dir)
	got, err := localaws.NewDynamoDB(endpoint).GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(name), Key: key, ConsistentRead: aws.Bool(true)})
	if rnf := (*ddbtypes.ResourceNotFoundException)(nil); errors.As(err, &rnf) {
		t.Fatalf("table %s gone after a restart with the same -data", name)
	} else if err != nil {
		t.Fatal(err)
	}
	if v, ok := got.Item["v"].(*ddbtypes.AttributeValueMemberN); !ok || v.Value != "42" {
		t.Errorf("item after a restart with the same -data: got %#v, want v = N 42", got.Item)
	}
}

func TestDynamoDBCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dynamodb", "-partition-wcu", "-1"}, "-partition-wcu -1: want 0 or more"},
		{[]string{"dynamodb", "-stream-retention", "0s"}, "-stream-retention 0s: want more than 0"},
		{[]string{"dynamodb", "-shard-records", "-2"}, "-shard-records -2: want 0 or more"},
		{[]string{"dynamodb", "extra"}, `unexpected argument "extra"`},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != cli.ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("fourlanes %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, cli.ExitUsage, tc.want)
		}
	}
}

// A -data folder whose state cannot be read stops the server before it
// listens, with an error naming the file; the file is left as it was. (It
// used to serve an empty database and log the problem, so a restart could
// look like data loss.)
func TestDynamoDBCommandRefusesAnUnreadableState(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ddb-state.json")
	if err := os.WriteFile(file, []byte(`{"Version":1,"Tables":[`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "dynamodb", "-listen", "127.0.0.1:0", "-data", dir)
	if code != cli.ExitError || stdout != "" || !strings.Contains(stderr, "ddb-state.json") || !strings.Contains(stderr, "cannot be loaded") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, no endpoint and an error naming ddb-state.json", code, stdout, stderr, cli.ExitError)
	}
	if b, _ := os.ReadFile(file); string(b) != `{"Version":1,"Tables":[` {
		t.Errorf("the unreadable state was changed: %q", b)
	}
}

// runCLI runs the framework's CLI build (no application) with these
// commands, as cmd/fourlanes does.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = cli.Run(context.Background(), nil, args, &out, &errb, Commands(nil)...)
	return code, out.String(), errb.String()
}

// TestUsageListsTheTwinCommands: a build with these commands lists them in
// its usage; the library (pkg/cli) alone does not.
func TestUsageListsTheTwinCommands(t *testing.T) {
	code, _, stderr := runCLI(t, "help")
	if code != cli.ExitOK || !strings.Contains(stderr, "fourlanes dev ") || !strings.Contains(stderr, "fourlanes dynamodb ") || !strings.Contains(stderr, "fourlanes reconcile ") {
		t.Errorf("help: exit %d, usage %q; want dev, dynamodb and reconcile listed", code, stderr)
	}
	var out, errb strings.Builder
	if code := cli.Run(context.Background(), nil, []string{"help"}, &out, &errb); code != cli.ExitOK || strings.Contains(errb.String(), "fourlanes dev ") {
		t.Errorf("help without the twin's commands: exit %d, usage %q; want no dev", code, errb.String())
	}
}

// TestResolveApp: dev brings up the CDK app cdk.json runs, with the function
// mains beside its folder, unless -app and -functions say otherwise; a
// folder without mains, or a cdk.json app that is not `go run`, is a usage
// error naming what to pass.
func TestResolveApp(t *testing.T) {
	root := t.TempDir()
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cdk.json", `{"app": "go run ./svc/infra", "context": {}}`)
	write("svc/functions/durable-consumer/main.go", "package main\n")
	write("other/fns/stream-filter/main.go", "package main\n")

	o := devOptions{}
	err := resolveApp(root, &o)
	if err != nil || o.app != "./svc/infra" || o.functions != filepath.Join("svc", "functions") {
		t.Errorf("defaults: app %q functions %q err %v; want ./svc/infra, svc/functions", o.app, o.functions, err)
	}
	o = devOptions{app: "./other/infra", functions: "other/fns"}
	if err := resolveApp(root, &o); err != nil || o.app != "./other/infra" || o.functions != "other/fns" {
		t.Errorf("-app ./other/infra -functions other/fns: app %q functions %q err %v; want them kept, no error", o.app, o.functions, err)
	}
	o = devOptions{app: "./other/infra"}
	if err := resolveApp(root, &o); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "-functions") {
		t.Errorf("-app without mains beside it: %v; want a usage error naming -functions", err)
	}
	write("cdk.json", `{"app": "npx ts-node bin/app.ts", "context": {}}`)
	if err := resolveApp(root, &devOptions{}); err == nil || !strings.Contains(err.Error(), "go run") || !strings.Contains(err.Error(), "-app") {
		t.Errorf("a cdk.json app that is not go run: %v; want an error saying so and naming -app", err)
	}
}
