package ddb_test

// The parity suite: the twin's own DynamoDB driven through aws-sdk-go-v2's dynamodb and
// dynamodbstreams clients, case by case against what AWS's documentation says. Every
// case names the page it follows; a failure reads "got X, want Y" with that page.
//
// Run: go test ./twin/ddb/ -run Parity -count=1 (add -race for the
// concurrency cases). Files: parity_expr_test.go (condition, filter, key-condition,
// projection and update expressions and their errors), parity_keys_test.go (key order,
// number form, paging, 1 MB pages), parity_limits_test.go (item size, keys, nesting,
// numbers, sets, request limits), parity_txn_test.go (conditional failures,
// ReturnValues, consumed capacity, transactions, ClientRequestToken, isolation,
// conflicts), parity_index_test.go (secondary indexes, parallel scan),
// parity_streams_test.go (streams and TTL), boto3_test.go (the same through boto3).
//
// Where AWS's documentation gives a limit but not an error's exact wording, a case
// checks the error code and the words AWS is known to send (as captured by public
// conformance suites run against AWS), noted beside the case.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/smithy-go"

	"github.com/fourlanes/fourlanes/twin/ddb"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// AWS documentation pages the cases cite.
const (
	docItemSizes     = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html"
	docConstraints   = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html"
	docDataTypes     = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html"
	docOperators     = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html"
	docUpdateExpr    = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html"
	docProjection    = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ProjectionExpressions.html"
	docDocPaths      = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.Attributes.html"
	docAttrNames     = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ExpressionAttributeNames.html"
	docAttrValues    = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ExpressionAttributeValues.html"
	docReserved      = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ReservedWords.html"
	docKeyCondition  = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.KeyConditionExpressions.html"
	docQueryFilter   = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.FilterExpression.html"
	docQueryOther    = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.Other.html"
	docQueryPaging   = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.Pagination.html"
	docAPIQuery      = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Query.html"
	docAPIScan       = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Scan.html"
	docAPIPut        = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html"
	docAPIUpdate     = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html"
	docAPIDelete     = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_DeleteItem.html"
	docAPIGet        = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_GetItem.html"
	docAPITxWrite    = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html"
	docAPITxGet      = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactGetItems.html"
	docTxAPIs        = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html"
	docReadWrite     = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html"
	docStreams       = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.html"
	docAPIGetShardIt = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_GetShardIterator.html"
	docAPIGetRecords = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_GetRecords.html"
	docAPIDescStream = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_DescribeStream.html"
	docAPIRecord     = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_Record.html"
	docTTLStreams    = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_Record.html#DDB-Type-streams_Record-userIdentity"
	docAPIUpdateTTL  = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html"
	docTTL           = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html"
	docErrors        = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html"
	docAPICondFailed = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html#DDB-PutItem-request-ReturnValuesOnConditionCheckFailure"
	docBatchGet      = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html"
)

// parity is one server (in-process, over HTTP) and the SDK clients real users have.
type parity struct {
	t     *testing.T
	db    *ddb.DB
	clock *ddb.TestClock
	url   string
	c     *dynamodb.Client
	s     *dynamodbstreams.Client
	ctx   context.Context
}

var tableSeq atomic.Int64

// newParity starts a DB behind httptest with a fake clock (unless opts.Now is set) and
// the TTL sweeper off (tests call SweepTTL), and clients with retries off so every
// error the server sends reaches the test as sent.
func newParity(t *testing.T, opts ddb.Options) *parity {
	t.Helper()
	clock := ddb.NewTestClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	if opts.Now == nil {
		opts.Now = clock.Now
	}
	if opts.TTLSweep == 0 {
		opts.TTLSweep = -1
	}
	db := ddb.New(opts)
	srv := httptest.NewServer(db.Handler())
	t.Cleanup(func() {
		srv.Close()
		if err := db.Close(); err != nil {
			t.Errorf("db.Close: %v", err)
		}
	})
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDPARITY", "parity-secret", ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
		HTTPClient:  localaws.HTTPClient(), // aws-sdk-go-v2#2737: its own copy of each request body
	}
	return &parity{
		t: t, db: db, clock: clock, url: srv.URL, ctx: context.Background(),
		c: dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) }),
		s: dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(srv.URL) }),
	}
}

// tableSpec is a table to create: key names and types ("S", "N", "B"), an optional stream.
type tableSpec struct {
	hash, hashType string
	rng, rngType   string
	streamView     types.StreamViewType
	ttlAttr        string
}

// table creates a table with a unique name and returns the name; the server must
// answer CreateTable (the control plane) or the test stops.
func (p *parity) table(spec tableSpec) string {
	p.t.Helper()
	if spec.hash == "" {
		spec.hash, spec.hashType = "pk", "S"
	}
	name := fmt.Sprintf("parity-%d-%s", tableSeq.Add(1), sanitize(p.t.Name()))
	if len(name) > 200 {
		name = name[:200]
	}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   []types.KeySchemaElement{{AttributeName: aws.String(spec.hash), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(spec.hash), AttributeType: types.ScalarAttributeType(spec.hashType)},
		},
	}
	if spec.rng != "" {
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(spec.rng), KeyType: types.KeyTypeRange})
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(spec.rng), AttributeType: types.ScalarAttributeType(spec.rngType)})
	}
	if spec.streamView != "" {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: spec.streamView}
	}
	if _, err := p.c.CreateTable(p.ctx, in); err != nil {
		p.t.Fatalf("CreateTable %s: %v", name, err)
	}
	if spec.ttlAttr != "" {
		_, err := p.c.UpdateTimeToLive(p.ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(spec.ttlAttr), Enabled: aws.Bool(true)},
		})
		if err != nil {
			p.t.Fatalf("UpdateTimeToLive %s: %v", name, err)
		}
	}
	p.t.Cleanup(func() {
		_, _ = p.c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// put writes item or stops the test.
func (p *parity) put(table string, it item) {
	p.t.Helper()
	if _, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
		p.t.Fatalf("PutItem %s: %v", render(it), err)
	}
}

// get reads an item with a strongly consistent read (nil when absent).
func (p *parity) get(table string, key item) item {
	p.t.Helper()
	out, err := p.c.GetItem(p.ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		p.t.Fatalf("GetItem %s: %v", render(key), err)
	}
	return out.Item
}

// ---- attribute values ----

type item = map[string]types.AttributeValue

func s(v string) types.AttributeValue    { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue    { return &types.AttributeValueMemberN{Value: v} }
func bin(v ...byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }
func boolv(v bool) types.AttributeValue  { return &types.AttributeValueMemberBOOL{Value: v} }
func null() types.AttributeValue         { return &types.AttributeValueMemberNULL{Value: true} }
func ss(v ...string) types.AttributeValue {
	return &types.AttributeValueMemberSS{Value: v}
}
func ns(v ...string) types.AttributeValue { return &types.AttributeValueMemberNS{Value: v} }
func bs(v ...[]byte) types.AttributeValue { return &types.AttributeValueMemberBS{Value: v} }
func list(v ...types.AttributeValue) types.AttributeValue {
	if v == nil {
		v = []types.AttributeValue{}
	}
	return &types.AttributeValueMemberL{Value: v}
}
func mapv(m item) types.AttributeValue { return &types.AttributeValueMemberM{Value: m} }

// render writes a value canonically (sets sorted, map keys sorted) so that two values
// compare as DynamoDB compares them: set order is not part of a set.
func render(v any) string {
	switch x := v.(type) {
	case nil:
		return "<nil>"
	case item:
		if x == nil {
			return "<nil>"
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = strconv.Quote(k) + ":" + render(x[k])
		}
		return "{" + strings.Join(parts, ",") + "}"
	case *types.AttributeValueMemberS:
		return "S" + strconv.Quote(x.Value)
	case *types.AttributeValueMemberN:
		return "N" + x.Value
	case *types.AttributeValueMemberB:
		return "B" + base64.StdEncoding.EncodeToString(x.Value)
	case *types.AttributeValueMemberBOOL:
		return "BOOL" + strconv.FormatBool(x.Value)
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberSS:
		return "SS" + sortedJoin(x.Value, strconv.Quote)
	case *types.AttributeValueMemberNS:
		return "NS" + sortedJoin(x.Value, func(s string) string { return s })
	case *types.AttributeValueMemberBS:
		strs := make([]string, len(x.Value))
		for i, b := range x.Value {
			strs[i] = base64.StdEncoding.EncodeToString(b)
		}
		return "BS" + sortedJoin(strs, func(s string) string { return s })
	case *types.AttributeValueMemberL:
		parts := make([]string, len(x.Value))
		for i, e := range x.Value {
			parts[i] = render(e)
		}
		return "L[" + strings.Join(parts, ",") + "]"
	case *types.AttributeValueMemberM:
		return "M" + render(item(x.Value))
	}
	return fmt.Sprintf("%T(%v)", v, v)
}

func sortedJoin(v []string, f func(string) string) string {
	c := make([]string, len(v))
	for i, s := range v {
		c[i] = f(s)
	}
	sort.Strings(c)
	return "{" + strings.Join(c, ",") + "}"
}

// ---- checks ----

// apiErr returns the error code and message the server sent (code "" when err is nil,
// "<not an API error>" when the call failed in the client).
func apiErr(err error) (code, msg string) {
	if err == nil {
		return "", ""
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode(), ae.ErrorMessage()
	}
	return "<not an API error>", err.Error()
}

// wantErr checks err is the API error code whose message contains every fragment.
func wantErr(t *testing.T, what string, err error, code string, doc string, fragments ...string) {
	t.Helper()
	gotCode, gotMsg := apiErr(err)
	if gotCode != code {
		t.Errorf("%s: got error %q (%s), want %s (doc %s)", what, gotCode, gotMsg, code, doc)
		return
	}
	for _, f := range fragments {
		if !strings.Contains(gotMsg, f) {
			t.Errorf("%s: got message %q, want it to contain %q (doc %s)", what, gotMsg, f, doc)
		}
	}
}

// wantOK checks err is nil.
func wantOK(t *testing.T, what string, err error, doc string) bool {
	t.Helper()
	if err != nil {
		code, msg := apiErr(err)
		t.Errorf("%s: got error %s: %s, want success (doc %s)", what, code, msg, doc)
		return false
	}
	return true
}

// wantItem compares two items canonically.
func wantItem(t *testing.T, what string, got, want item, doc string) {
	t.Helper()
	if g, w := render(got), render(want); g != w {
		t.Errorf("%s: got %s, want %s (doc %s)", what, g, w, doc)
	}
}

// asTCE reports whether err is a TransactionCanceledException, setting *out.
func asTCE(err error, out **types.TransactionCanceledException) bool { return errors.As(err, out) }

// reasonCodes lists the cancellation reasons' codes in order.
func reasonCodes(tce *types.TransactionCanceledException) []string {
	out := make([]string, len(tce.CancellationReasons))
	for i, r := range tce.CancellationReasons {
		out[i] = aws.ToString(r.Code)
	}
	return out
}

func TestParityHarness(t *testing.T) {
	// The control plane answers already: the harness itself must work.
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{hash: "pk", hashType: "S", rng: "sk", rngType: "N"})
	out, err := p.c.DescribeTable(p.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if !wantOK(t, "DescribeTable", err, "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_DescribeTable.html") {
		return
	}
	if got := out.Table.TableStatus; got != types.TableStatusActive {
		t.Errorf("TableStatus: got %s, want ACTIVE", got)
	}
	if got, want := render(item{"x": ss("b", "a")}), render(item{"x": ss("a", "b")}); got != want {
		t.Errorf("render ignores set order: got %s, want %s", got, want)
	}
}

// scanPages follows in page by page (at most maxPages pages), counting the items it
// returns in seen by the rendering of their attribute name; false when a page failed
// (reported as what).
func (p *parity) scanPages(t *testing.T, what string, in *dynamodb.ScanInput, maxPages int, name string, seen map[string]int, doc string) bool {
	t.Helper()
	for i := 0; i < maxPages; i++ {
		out, err := p.c.Scan(p.ctx, in)
		if !wantOK(t, what, err, doc) {
			return false
		}
		for _, it := range out.Items {
			seen[render(it[name])]++
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return true
}
