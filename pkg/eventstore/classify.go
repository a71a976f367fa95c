package eventstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fourlanes/fourlanes/pkg/chain"
)

// DynamoDB's transaction limits.
const (
	maxActions   = 100
	maxTxBytes   = 4 << 20
	headRowBytes = 512 // generous estimate of a head row
)

type role int

const (
	roleHead role = iota
	roleEvent
	roleExtra
	roleIdem // the idempotency-key row of the request
)

// owner says which request and which of its actions an item index holds.
type owner struct {
	req   int
	role  role
	index int // the caller's index into its extra writes (roleExtra)
}

// contentionError marks an attempt lost to another writer of the same head.
// headMoved: the head's own condition failed, so the head is no longer where
// the attempt was sealed (and, never moving back, never will be again).
// throttled: the partition's write budget refused it (nothing was written).
// head: where the head is now, when DynamoDB returned it with the failed
// condition (ReturnValuesOnConditionCheckFailure ALL_OLD): the retry can
// re-seal on it without reading the head again.
type contentionError struct {
	err       error
	headMoved bool
	throttled bool
	head      *chain.Head
	shards    int // the shard count head was written with
}

func (e *contentionError) Error() string {
	why := "TransactionConflict: another transaction held the head"
	switch {
	case e.headMoved:
		why = "another writer moved the head"
	case e.throttled:
		why = "the partition's write budget throttled it"
	}
	return "head contention (" + why + "): " + e.err.Error()
}
func (e *contentionError) Unwrap() error { return e.err }

func isContention(err error) bool {
	var c *contentionError
	return errors.As(err, &c)
}

func headMoved(err error) bool {
	var c *contentionError
	return errors.As(err, &c) && c.headMoved
}

// ambiguousError marks an attempt whose outcome DynamoDB did not tell: it may
// have committed. Only the identical request (same token) may follow it.
type ambiguousError struct{ err error }

func (e *ambiguousError) Error() string { return "outcome unknown: " + e.err.Error() }
func (e *ambiguousError) Unwrap() error { return e.err }

func isAmbiguous(err error) bool {
	var a *ambiguousError
	return errors.As(err, &a)
}

// idemUsedError: the request's idempotency key already has a row; the emit
// it names is the answer (see Store.EmitWith).
type idemUsedError struct{}

func (e *idemUsedError) Error() string {
	return "idempotency key already used"
}

// batchCallerError: these requests' own writes cancelled the transaction
// (DynamoDB may report several at once): a *CallerWriteError or an
// *idemUsedError per request index.
type batchCallerError struct {
	failed map[int]error // by request index
}

func (e *batchCallerError) Error() string {
	for _, f := range e.failed {
		return f.Error()
	}
	return "caller write failed"
}

// splitError: DynamoDB refused the transaction as a whole (e.g. two actions
// on one item); each request may be fine alone.
type splitError struct{ err error }

func (e *splitError) Error() string { return e.err.Error() }
func (e *splitError) Unwrap() error { return e.err }

// classify turns a TransactWriteItems error into contention (retry), one
// caller's answer, or a failure of the whole attempt.
func classify(err error, owners []owner) error {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		reasons := tce.CancellationReasons
		for i, r := range reasons {
			code := aws.ToString(r.Code)
			if i < len(owners) && owners[i].role == roleHead && code == "ConditionalCheckFailed" {
				ce := &contentionError{err: err, headMoved: true}
				if r.Item != nil {
					h, herr := HeadFromItem(r.Item)
					n, nerr := headShards(r.Item)
					if herr == nil && nerr == nil {
						ce.head, ce.shards = h, n
					}
				}
				return ce
			}
		}
		for _, r := range reasons {
			if aws.ToString(r.Code) == "TransactionConflict" {
				return &contentionError{err: err}
			}
		}
		// A partition over its write budget (AWS: 1,000 WCU/s per partition
		// key; the tenant's head and events share one) cancels the whole
		// transaction and writes nothing: pace and retry, like contention.
		for _, r := range reasons {
			switch aws.ToString(r.Code) {
			case "ProvisionedThroughputExceeded", "ThrottlingError":
				return &contentionError{err: err, throttled: true}
			}
		}
		callers := &batchCallerError{failed: map[int]error{}}
		for i, r := range reasons {
			code := aws.ToString(r.Code)
			if code == "" || code == "None" || i >= len(owners) {
				continue
			}
			o := owners[i]
			switch o.role {
			case roleExtra:
				if _, seen := callers.failed[o.req]; !seen {
					callers.failed[o.req] = &CallerWriteError{Index: o.index, Code: code, Message: aws.ToString(r.Message)}
				}
			case roleIdem:
				if code == "ConditionalCheckFailed" {
					if _, seen := callers.failed[o.req]; !seen {
						callers.failed[o.req] = &idemUsedError{}
					}
					continue
				}
				return fmt.Errorf("idempotency row %s: %s: %w", code, aws.ToString(r.Message), err)
			case roleEvent:
				if code == "ConditionalCheckFailed" {
					return ErrLogAhead
				}
				return fmt.Errorf("event row %s: %s: %w", code, aws.ToString(r.Message), err)
			}
		}
		if len(callers.failed) > 0 {
			return callers
		}
		return fmt.Errorf("transaction cancelled: %w", err)
	}
	var tc *types.TransactionConflictException
	if errors.As(err, &tc) {
		return &contentionError{err: err}
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
			// A definite refusal the SDK's retryer has already retried.
			return &contentionError{err: err, throttled: true}
		}
	}
	if ambiguous(err) {
		return &ambiguousError{fmt.Errorf("transact write: %w", err)}
	}
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" {
		return &splitError{fmt.Errorf("transaction refused by DynamoDB: %w", err)}
	}
	return fmt.Errorf("transact write: %w", err)
}

// ambiguous reports whether err leaves open whether the transaction
// committed. TransactionInProgress: a request with this token is still
// running (the SDK's own retry of a request whose answer was lost). A 5xx or
// a timeout: DynamoDB may have committed before failing to answer. No answer
// at all (a dropped connection, EOF, a deadline while in flight): the request
// may have arrived. Every 4xx other than TransactionInProgress is a definite
// refusal: nothing was written.
func ambiguous(err error) bool {
	var tip *types.TransactionInProgressException
	if errors.As(err, &tip) {
		return true
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && status.HTTPStatusCode() >= 500 {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "InternalServerError", "ServiceUnavailable", "RequestTimeout", "RequestTimeoutException":
			return true
		}
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var send *smithyhttp.RequestSendError
	var canceled *aws.RequestCanceledError
	var netErr net.Error
	if errors.As(err, &send) || errors.As(err, &canceled) || errors.As(err, &netErr) {
		return true
	}
	return strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "use of closed network connection")
}

// checkAlone refuses an Emit that cannot fit a transaction even alone, and
// records its size for batching.
func (s *Store) checkAlone(r *request) error {
	if n := 1 + r.actions(); n > maxActions {
		return fmt.Errorf("%d extra writes + head + event (+ idempotency row) = %d actions; a transaction holds at most %d: %w",
			len(r.extra), n, maxActions, ErrTooLarge)
	}
	item, err := sizeOfEvent(r)
	if err != nil {
		return err
	}
	size := item
	if r.idemKey != "" {
		size += idemRowBytes + len(r.idemKey)
	}
	for i, x := range r.extra {
		n, err := actionSize(x)
		if err != nil {
			return fmt.Errorf("extra_writes[%d]: %w", i, err)
		}
		size += n
	}
	if size+headRowBytes > maxTxBytes {
		return fmt.Errorf("transaction is about %d bytes; DynamoDB allows %d: %w", size+headRowBytes, maxTxBytes, ErrTooLarge)
	}
	r.size = size
	return nil
}

func sizeOfEvent(r *request) (int, error) {
	// Seal fields are not set yet; count them at their fixed sizes.
	n := 64*2 + 20 + len("prev_hash") + len("hash") + len("seq")
	it, err := r.row.Item(1, zeroHash, zeroHash)
	if err != nil {
		return 0, err
	}
	return n + ItemSize(it), nil
}

const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

func actionSize(x types.TransactWriteItem) (int, error) {
	n := 0
	count := 0
	if x.Put != nil {
		count++
		n += ItemSize(x.Put.Item) + len(aws.ToString(x.Put.ConditionExpression)) + ItemSize(x.Put.ExpressionAttributeValues)
	}
	if x.Update != nil {
		count++
		n += ItemSize(x.Update.Key) + len(aws.ToString(x.Update.UpdateExpression)) + len(aws.ToString(x.Update.ConditionExpression)) + ItemSize(x.Update.ExpressionAttributeValues)
	}
	if x.Delete != nil {
		count++
		n += ItemSize(x.Delete.Key) + len(aws.ToString(x.Delete.ConditionExpression)) + ItemSize(x.Delete.ExpressionAttributeValues)
	}
	if x.ConditionCheck != nil {
		count++
		n += ItemSize(x.ConditionCheck.Key) + len(aws.ToString(x.ConditionCheck.ConditionExpression)) + ItemSize(x.ConditionCheck.ExpressionAttributeValues)
	}
	if count != 1 {
		return 0, fmt.Errorf("has %d of Put, Update, Delete, ConditionCheck; exactly one is required: %w", count, ErrBadWrite)
	}
	return n, nil
}

// ItemSize is an item's size as DynamoDB counts it against the 400 KB item
// limit and bills it: attribute names plus values; a string or binary is its
// byte length, a number about one byte per two significant digits plus one, a
// boolean or null one byte, a list or map three bytes plus one per element
// plus its elements (and a map's names). Emit uses it to refuse an oversized
// transaction before sending; make bench uses it for the WCU model.
func ItemSize(m map[string]types.AttributeValue) int {
	n := 0
	for k, v := range m {
		n += len(k) + avSize(v)
	}
	return n
}

func avSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return numberSize(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += 1 + avSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += 1 + len(k) + avSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, e := range x.Value {
			n += len(e)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, e := range x.Value {
			n += numberSize(e)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, e := range x.Value {
			n += len(e)
		}
		return n
	}
	return 0
}

// numberSize: one byte per two significant digits, plus one. twin/ddb/attr's
// numberSize (the twin server's consumed capacity, reported beside this model by `make
// bench`) must stay in step with this one; the framework must not import the twin, so
// TestItemSizeMatchesEventstoreModel in twin/ddb holds them to the same sizes.
func numberSize(s string) int {
	mant, _, _ := strings.Cut(strings.ToLower(s), "e")
	digits := 0
	lead := true
	trailingZeros := 0
	for i := 0; i < len(mant); i++ {
		c := mant[i]
		if c < '0' || c > '9' {
			continue
		}
		if lead && c == '0' {
			continue
		}
		lead = false
		digits++
		if c == '0' {
			trailingZeros++
		} else {
			trailingZeros = 0
		}
	}
	digits -= trailingZeros
	return (digits+1)/2 + 1
}
