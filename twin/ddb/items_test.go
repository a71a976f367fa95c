package ddb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// dpEnv is a DB served over HTTP with the SDK's DynamoDB client (no retries, so a
// test sees every error the server sends).
type dpEnv struct {
	db  *DB
	url string
	c   *dynamodb.Client
}

func newDP(t testing.TB, opts Options) *dpEnv {
	t.Helper()
	if opts.TTLSweep == 0 {
		opts.TTLSweep = -1
	}
	db := New(opts)
	srv := startServer(t, db)
	return &dpEnv{db: db, url: srv.URL, c: newDDBClient(srv.URL)}
}

// tableSpec describes a test table: pk (S) and optionally sk (N or S), GSI "gsi" on
// g1 (S) / g2 (N) with projection gsiProj, LSI "lsi" on l1 (S).
type tableSpec struct {
	sk      types.ScalarAttributeType // "" for no sort key
	gsiProj types.ProjectionType      // "" for no GSI
	lsi     bool
}

func (e *dpEnv) create(t testing.TB, name string, s tableSpec) {
	t.Helper()
	in := pkTableInput(name)
	if s.sk != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("sk"), AttributeType: s.sk})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange})
	}
	if s.gsiProj != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String("g1"), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String("g2"), AttributeType: types.ScalarAttributeTypeN})
		p := &types.Projection{ProjectionType: s.gsiProj}
		if s.gsiProj == types.ProjectionTypeInclude {
			p.NonKeyAttributes = []string{"inc"}
		}
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("gsi"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g1"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("g2"), KeyType: types.KeyTypeRange}},
			Projection: p,
		}}
	}
	if s.lsi {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("l1"), AttributeType: types.ScalarAttributeTypeS})
		in.LocalSecondaryIndexes = []types.LocalSecondaryIndex{{
			IndexName:  aws.String("lsi"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("l1"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}}
	}
	if _, err := e.c.CreateTable(context.Background(), in); err != nil {
		t.Fatalf("CreateTable %s: %v", name, err)
	}
}

type av = types.AttributeValue

func s(v string) av   { return &types.AttributeValueMemberS{Value: v} }
func n(v string) av   { return &types.AttributeValueMemberN{Value: v} }
func ni(v int) av     { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
func bin(v []byte) av { return &types.AttributeValueMemberB{Value: v} }

func strOf(t testing.TB, v av) string {
	t.Helper()
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return x.Value
	case *types.AttributeValueMemberN:
		return x.Value
	case nil:
		return "<absent>"
	}
	t.Fatalf("not S or N: %#v", v)
	return ""
}

func (e *dpEnv) put(t testing.TB, table string, item map[string]av) {
	t.Helper()
	if _, err := e.c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}
}

func (e *dpEnv) get(t testing.TB, table string, key map[string]av) map[string]av {
	t.Helper()
	out, err := e.c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	return out.Item
}

// wantCode checks that err is the API error with code, and that its message holds msg.
func wantCode(t testing.TB, err error, code, msg string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got error %v, want API error %s", err, code)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("got %s (%s), want %s", ae.ErrorCode(), ae.ErrorMessage(), code)
	}
	if !strings.Contains(ae.ErrorMessage(), msg) {
		t.Fatalf("%s message %q does not contain %q", code, ae.ErrorMessage(), msg)
	}
}

func TestPutGetDeleteRoundTrip(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "items", tableSpec{sk: types.ScalarAttributeTypeN})
	ctx := context.Background()
	item := map[string]av{
		"pk": s("a"), "sk": n("1"),
		"str":  s("héllo"),
		"num":  n("12345678901234567890123456789012345678"),
		"bin":  bin([]byte{0, 1, 2, 255}),
		"bool": &types.AttributeValueMemberBOOL{Value: true},
		"nul":  &types.AttributeValueMemberNULL{Value: true},
		"list": &types.AttributeValueMemberL{Value: []av{s("x"), n("2")}},
		"mp":   &types.AttributeValueMemberM{Value: map[string]av{"in": s("y")}},
		"ss":   &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":   &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
		"bs":   &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2}}},
	}
	e.put(t, "items", item)
	got := e.get(t, "items", map[string]av{"pk": s("a"), "sk": n("1")})
	if len(got) != len(item) {
		t.Fatalf("got %d attributes, want %d: %#v", len(got), len(item), got)
	}
	if strOf(t, got["num"]) != "12345678901234567890123456789012345678" || strOf(t, got["str"]) != "héllo" {
		t.Fatalf("got %#v", got)
	}
	if b := got["bin"].(*types.AttributeValueMemberB).Value; string(b) != string([]byte{0, 1, 2, 255}) {
		t.Fatalf("binary: got %v", b)
	}

	pr, err := e.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("items"), Key: map[string]av{"pk": s("a"), "sk": n("1")},
		ProjectionExpression: aws.String("#s, mp.#i"), ExpressionAttributeNames: map[string]string{"#s": "str", "#i": "in"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Item) != 2 || strOf(t, pr.Item["str"]) != "héllo" || strOf(t, pr.Item["mp"].(*types.AttributeValueMemberM).Value["in"]) != "y" {
		t.Fatalf("projection: got %#v", pr.Item)
	}

	del, err := e.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("items"), Key: map[string]av{"pk": s("a"), "sk": n("1")}, ReturnValues: types.ReturnValueAllOld})
	if err != nil {
		t.Fatal(err)
	}
	if strOf(t, del.Attributes["str"]) != "héllo" {
		t.Fatalf("DeleteItem ALL_OLD: got %#v", del.Attributes)
	}
	if got := e.get(t, "items", map[string]av{"pk": s("a"), "sk": n("1")}); got != nil {
		t.Fatalf("after delete: got %#v", got)
	}
	// Deleting what is not there succeeds and returns nothing.
	del, err = e.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("items"), Key: map[string]av{"pk": s("a"), "sk": n("1")}, ReturnValues: types.ReturnValueAllOld})
	if err != nil || del.Attributes != nil {
		t.Fatalf("delete of a missing item: %v %#v", err, del.Attributes)
	}
}

func TestConditionalWrites(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "cond", tableSpec{})
	ctx := context.Background()
	put := func(v string, fail types.ReturnValuesOnConditionCheckFailure) error {
		_, err := e.c.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String("cond"), Item: map[string]av{"pk": s("k"), "v": s(v)},
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: fail,
		})
		return err
	}
	if err := put("first", ""); err != nil {
		t.Fatal(err)
	}
	err := put("second", "")
	wantCode(t, err, "ConditionalCheckFailedException", "The conditional request failed")
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) || ccf.Item != nil {
		t.Fatalf("without ALL_OLD: got %#v", err)
	}
	err = put("third", types.ReturnValuesOnConditionCheckFailureAllOld)
	if !errors.As(err, &ccf) || strOf(t, ccf.Item["v"]) != "first" {
		t.Fatalf("with ALL_OLD: got %v (item %#v)", err, ccf)
	}
	if got := e.get(t, "cond", map[string]av{"pk": s("k")}); strOf(t, got["v"]) != "first" {
		t.Fatalf("failed conditions wrote: %#v", got)
	}
	// A condition on a delete, with values.
	_, err = e.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String("cond"), Key: map[string]av{"pk": s("k")},
		ConditionExpression: aws.String("v = :v"), ExpressionAttributeValues: map[string]av{":v": s("nope")},
	})
	wantCode(t, err, "ConditionalCheckFailedException", "conditional request failed")
	if _, err := e.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String("cond"), Key: map[string]av{"pk": s("k")},
		ConditionExpression: aws.String("v = :v"), ExpressionAttributeValues: map[string]av{":v": s("first")},
	}); err != nil {
		t.Fatal(err)
	}
}

func TestUpdateItemReturnValues(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "upd", tableSpec{sk: types.ScalarAttributeTypeS})
	ctx := context.Background()
	k := map[string]av{"pk": s("p"), "sk": s("s")}
	upd := func(rv types.ReturnValue) map[string]av {
		t.Helper()
		out, err := e.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String("upd"), Key: k,
			UpdateExpression:          aws.String("SET n = if_not_exists(n, :z) + :one, oth = :o"),
			ExpressionAttributeValues: map[string]av{":z": n("0"), ":one": n("1"), ":o": s("x")},
			ReturnValues:              rv,
		})
		if err != nil {
			t.Fatalf("UpdateItem %s: %v", rv, err)
		}
		return out.Attributes
	}
	// The first update creates the item from its key.
	if got := upd(types.ReturnValueAllNew); strOf(t, got["n"]) != "1" || strOf(t, got["pk"]) != "p" || strOf(t, got["sk"]) != "s" {
		t.Fatalf("ALL_NEW: %#v", got)
	}
	if got := upd(types.ReturnValueUpdatedOld); len(got) != 2 || strOf(t, got["n"]) != "1" {
		t.Fatalf("UPDATED_OLD: %#v", got)
	}
	if got := upd(types.ReturnValueUpdatedNew); len(got) != 2 || strOf(t, got["n"]) != "3" {
		t.Fatalf("UPDATED_NEW: %#v", got)
	}
	if got := upd(types.ReturnValueAllOld); len(got) != 4 || strOf(t, got["n"]) != "3" {
		t.Fatalf("ALL_OLD: %#v", got)
	}
	if got := upd(types.ReturnValueNone); got != nil {
		t.Fatalf("NONE: %#v", got)
	}
	_, err := e.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String("upd"), Key: k,
		UpdateExpression: aws.String("SET sk = :v"), ExpressionAttributeValues: map[string]av{":v": s("x")},
	})
	wantCode(t, err, "ValidationException", "Cannot update attribute sk. This attribute is part of the key")
	_, err = e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("upd"), Item: k, ReturnValues: types.ReturnValueAllNew})
	wantCode(t, err, "ValidationException", "ReturnValues can only be ALL_OLD or NONE")
}

// TestConcurrentUpdatesLinearizable: increments from many clients all land.
func TestConcurrentUpdatesLinearizable(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "ctr", tableSpec{})
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := e.c.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
					TableName: aws.String("ctr"), Key: map[string]av{"pk": s("c")},
					UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]av{":one": n("1")},
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := strOf(t, e.get(t, "ctr", map[string]av{"pk": s("c")})["n"]); got != fmt.Sprint(workers*each) {
		t.Fatalf("counter: got %s, want %d", got, workers*each)
	}
}
