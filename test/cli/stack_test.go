package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	example "github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/cli"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

// stackTemplate is a stack of the two tables the table commands need, with
// the backbone's output names for them, and a checkpoint bucket (no
// function: nothing runs).
var stackTemplate = fmt.Sprintf(`{
  "Resources": {
    "Events": {"Type": "AWS::DynamoDB::Table", "Properties": {
      "BillingMode": "PAY_PER_REQUEST",
      "AttributeDefinitions": [{"AttributeName": %[1]q, "AttributeType": "S"}, {"AttributeName": %[2]q, "AttributeType": "N"}],
      "KeySchema": [{"AttributeName": %[1]q, "KeyType": "HASH"}, {"AttributeName": %[2]q, "KeyType": "RANGE"}],
      "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"}}},
    "State": {"Type": "AWS::DynamoDB::Table", "Properties": {
      "BillingMode": "PAY_PER_REQUEST",
      "AttributeDefinitions": [{"AttributeName": %[3]q, "AttributeType": "S"}, {"AttributeName": %[4]q, "AttributeType": "S"}],
      "KeySchema": [{"AttributeName": %[3]q, "KeyType": "HASH"}, {"AttributeName": %[4]q, "KeyType": "RANGE"}]}},
    "Checkpoints": {"Type": "AWS::S3::Bucket"}
  },
  "Outputs": {
    %[5]q: {"Value": {"Ref": "Events"}},
    %[6]q: {"Value": {"Ref": "State"}},
    %[7]q: {"Value": {"Ref": "Checkpoints"}}
  }
}`, keys.AttrTenant, keys.AttrSeq, keys.AttrPK, keys.AttrSK, keys.OutputEventsTable, keys.OutputStateTable, keys.OutputCheckpointBucket)

// TestStackFlag: commands find their resources by -stack NAME through the
// twin's CloudFormation DescribeStacks (AWS_ENDPOINT_URL_CLOUDFORMATION),
// end to end: emit, export and watermarks against the stack's tables; an
// explicit flag wins over the output; a missing output names the stack and
// the output; an unknown stack is CloudFormation's error; -stack with
// -local is a usage error.
func TestStackFlag(t *testing.T) {
	ddbEP, sqsEP := twintest.Endpoints(t)
	tmpl, err := cfn.Parse([]byte(stackTemplate))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cli%08x", rand.Uint32())
	tw, err := twin.Up(t.Context(), twin.Config{Template: tmpl, StackName: name, DynamoDBEndpoint: ddbEP, SQSEndpoint: sqsEP,
		Code:   func(*cfn.Template, *cfn.Resource) (string, error) { return "", fmt.Errorf("no functions here") },
		Logger: twintest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tw.Close)
	events, _ := tw.TableName("Events")
	localAWSEnv(t, ddbEP)
	t.Setenv("AWS_ENDPOINT_URL_CLOUDFORMATION", tw.CloudFormationEndpoint())
	t.Setenv("AWS_ENDPOINT_URL_S3", tw.S3Endpoint())
	t.Setenv(keys.EnvEventsTable, "")
	t.Setenv(keys.EnvStateTable, "")
	t.Setenv(keys.EnvCheckpointBucket, "")
	t.Setenv(cli.EnvRepairFunction, "")

	emit := func(args ...string) envelope.Envelope {
		t.Helper()
		args = append([]string{"emit", "-tenant", "acme", "-type", "order.placed", "-payload", strings.Replace(placedPayload, "%s", "o-1", 1)}, args...)
		code, out, stderr := runCLI(t, args...)
		if code != cli.ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var e envelope.Envelope
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatalf("%v: stdout %q: %v", args, out, err)
		}
		return e
	}
	for want := int64(1); want <= 2; want++ {
		if e := emit("-stack", name); e.Seq != want {
			t.Fatalf("emit -stack %s: got seq %d, want %d", name, e.Seq, want)
		}
	}
	head, err := localaws.NewDynamoDB(ddbEP).GetItem(context.Background(), headKey(events, "acme"))
	if err != nil || head.Item == nil {
		t.Fatalf("the stack's events table %s has no head for acme (%v): emit did not use the stack's output", events, err)
	}

	// export finds the checkpoint bucket by its output too: it copies the
	// newest checkpoint at or below the head (unverified: verify does that).
	bucket := tw.Outputs()[keys.OutputCheckpointBucket]
	note := []byte("a checkpoint note at seq 1\n")
	if _, err := s3.NewFromConfig(aws.Config{Region: localaws.Region, Credentials: credentials.NewStaticCredentialsProvider("fourlanes", "local", "")},
		func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(tw.S3Endpoint()), true }).PutObject(context.Background(),
		&s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(reconcile.CheckpointKey("acme", 1)), Body: bytes.NewReader(note)}); err != nil {
		t.Fatalf("put a checkpoint in %s: %v", bucket, err)
	}
	file := filepath.Join(t.TempDir(), "acme.jsonl")
	code, _, stderr := runCLI(t, "export", "-stack", name, "-tenant", "acme", "-o", file)
	if code != cli.ExitOK || !strings.Contains(stderr, "exported tenant acme: 2 events") || !strings.Contains(stderr, "signed checkpoint at seq 1 (s3://"+bucket+"/") {
		t.Fatalf("export -stack: exit %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(file + ".checkpoint"); err != nil || !bytes.Equal(b, note) {
		t.Errorf("export -stack: %s.checkpoint: got %q (%v), want the bucket's note", file, b, err)
	}
	if code, out, _ := runCLI(t, "verify", file); code != cli.ExitOK || !strings.Contains(out, "2 events verified") {
		t.Errorf("verify of export -stack: exit %d: %s", code, out)
	}
	code, out, stderr := runCLI(t, "watermarks", "-stack", name, "-tenant", "acme")
	if code != cli.ExitOK || !strings.Contains(out, "acme") {
		t.Errorf("watermarks -stack: exit %d: %s %s", code, out, stderr)
	}

	// An explicit -table wins over the stack's output.
	db := localaws.DynamoDB(t)
	other := aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "other"))).TableName)
	if e := emit("-stack", name, "-table", other); e.Seq != 1 {
		t.Errorf("emit -stack %s -table %s: got seq %d, want 1 (a new tenant chain in the explicit table)", name, other, e.Seq)
	}
	if e := emit("-stack", name); e.Seq != 3 {
		t.Errorf("emit -stack %s after the explicit table: got seq %d, want 3", name, e.Seq)
	}
	// A default from the environment does not: -stack is on the command line.
	t.Setenv(keys.EnvEventsTable, other)
	if e := emit("-stack", name); e.Seq != 4 {
		t.Errorf("emit -stack %s with $%s=%s: got seq %d, want 4 (the stack's table)", name, keys.EnvEventsTable, other, e.Seq)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"repair", "-stack", name}, cli.ExitError, "stack " + name + " has no output " + keys.OutputRepairFunction},
		{[]string{"reconcile", "-stack", name}, cli.ExitError, "stack " + name + " has no output " + keys.OutputReconcileURL},
		{[]string{"watermarks", "-stack", "NoSuchStack"}, cli.ExitError, "Stack with id NoSuchStack does not exist"},
		{[]string{"emit", "-stack", name, "-local", "-tenant", "acme", "-type", "order.placed", "-payload", "{}"}, cli.ExitUsage, "-stack and -local"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

// headKey reads tenant's head row in table.
func headKey(table, tenant string) *dynamodb.GetItemInput {
	return &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Key: map[string]ddbtypes.AttributeValue{
		keys.AttrTenant: &ddbtypes.AttributeValueMemberS{Value: tenant},
		keys.AttrSeq:    &ddbtypes.AttributeValueMemberN{Value: "0"},
	}}
}

func TestMain(m *testing.M) { localaws.Main(m) }

// placedPayload is an order.placed payload of the orders example (%s: the order id).
const placedPayload = `{"order_id":"%s","customer_email":"zoë@example.com","items":[{"sku":"A-1","qty":2}],"total_cents":1999,"currency":"EUR"}`

// runCLI runs the orders example's CLI (cli.Run with its application).
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Run(context.Background(), &example.App, args, &out, &errb)
	return code, out.String(), errb.String()
}

// localAWSEnv points the default AWS configuration at a local DynamoDB with
// dummy credentials and no shared files.
func localAWSEnv(t *testing.T, dynamodbEndpoint string) {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodbEndpoint)
	t.Setenv("AWS_REGION", localaws.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", "fourlanes")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
}
