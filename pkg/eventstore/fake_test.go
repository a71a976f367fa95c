package eventstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// scriptedDB answers TransactWriteItems from a script of errors (nil =
// success) and has no head, so every attempt starts from genesis. It scripts exact error sequences
// for unit tests; conflict_test.go drives the same path against our DynamoDB
// with AWS-like TransactionConflict on.
type scriptedDB struct {
	mu     sync.Mutex
	script []error
	calls  [][]types.TransactWriteItem
}

var _ eventstore.DynamoDB = (*scriptedDB)(nil)

func (s *scriptedDB) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, in.TransactItems)
	if len(s.script) == 0 {
		return &dynamodb.TransactWriteItemsOutput{}, nil
	}
	err := s.script[0]
	s.script = s.script[1:]
	if err != nil {
		return nil, err
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func (s *scriptedDB) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

func (s *scriptedDB) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return &dynamodb.QueryOutput{}, nil
}

func (s *scriptedDB) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return &dynamodb.ScanOutput{}, nil
}

func (s *scriptedDB) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return &dynamodb.BatchGetItemOutput{}, nil
}

func cancelled(codes ...string) error {
	rs := make([]types.CancellationReason, len(codes))
	for i, c := range codes {
		rs[i] = types.CancellationReason{Code: aws.String(c), Message: aws.String("reason " + c)}
	}
	return &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: rs}
}

func TestFakeTransactionConflictIsRetried(t *testing.T) {
	for name, first := range map[string]error{
		"cancellation reason TransactionConflict": cancelled("None", "TransactionConflict", "None"),
		"TransactionConflictException":            &types.TransactionConflictException{Message: aws.String("conflict")},
		"TransactionInProgressException":          &types.TransactionInProgressException{Message: aws.String("in progress")},
		"head condition failed":                   cancelled("ConditionalCheckFailed", "None", "None"),
	} {
		t.Run(name, func(t *testing.T) {
			db := &scriptedDB{script: []error{first, first}}
			s := mustStore(t, db, eventstore.Config{Table: "events", Catalog: catalog, Batching: eventstore.BatchNone})
			e, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{}, types.TransactWriteItem{
				Put: &types.Put{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o"}}}})
			if err != nil {
				t.Fatalf("got %v, want success after retries", err)
			}
			if len(db.calls) != 3 || e.Seq != 1 {
				t.Errorf("got %d calls and seq %d, want 3 calls and seq 1", len(db.calls), e.Seq)
			}
			if st := s.Stats(); st.FailedAttempts != 2 {
				t.Errorf("failed attempts: got %d, want 2", st.FailedAttempts)
			}
		})
	}
}

func TestFakeConflictExhaustsBudget(t *testing.T) {
	conflict := cancelled("None", "TransactionConflict")
	db := &scriptedDB{script: []error{conflict, conflict, conflict, conflict}}
	s := mustStore(t, db, eventstore.Config{Table: "events", Catalog: catalog, Batching: eventstore.BatchNone, MaxAttempts: 4})
	_, err := s.Emit(ctxFor("t9"), "order.placed", map[string]any{})
	var ce *eventstore.ContentionError
	if !errors.As(err, &ce) || ce.Attempts != 4 || ce.Tenant != "t9" {
		t.Fatalf("got %v, want ContentionError for t9 after 4 attempts", err)
	}
}

func TestFakeCallerReasonNamedByCallerIndex(t *testing.T) {
	// Items: head, event, extra_writes[0], extra_writes[1], extra_writes[2].
	db := &scriptedDB{script: []error{cancelled("None", "None", "None", "None", "ValidationError")}}
	s := mustStore(t, db, eventstore.Config{Table: "events", Catalog: catalog, Batching: eventstore.BatchNone})
	put := types.TransactWriteItem{Put: &types.Put{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o"}}}}
	_, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{}, put, put, put)
	var cw *eventstore.CallerWriteError
	if !errors.As(err, &cw) || cw.Index != 2 || cw.Code != "ValidationError" {
		t.Fatalf("got %v, want extra_writes[2] ValidationError", err)
	}
	if len(db.calls) != 1 {
		t.Errorf("a caller's answer was retried: %d calls", len(db.calls))
	}
}

func TestFakeEventRowConflictIsLoud(t *testing.T) {
	db := &scriptedDB{script: []error{cancelled("None", "ConditionalCheckFailed")}}
	s := mustStore(t, db, eventstore.Config{Table: "events", Catalog: catalog, Batching: eventstore.BatchNone})
	if _, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{}); !errors.Is(err, eventstore.ErrLogAhead) {
		t.Fatalf("got %v, want ErrLogAhead", err)
	}
}

func TestFakeValidationExceptionIsReturned(t *testing.T) {
	db := &scriptedDB{script: []error{&smithy.GenericAPIError{Code: "ValidationException", Message: "Transaction request cannot include multiple operations on one item"}}}
	s := mustStore(t, db, eventstore.Config{Table: "events", Catalog: catalog})
	_, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
		t.Fatalf("got %v, want the ValidationException", err)
	}
}
