package eventstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
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
)

// owner says which request and which of its actions an item index holds.
type owner struct {
	req   int
	role  role
	index int // the caller's index into its extra writes (roleExtra)
}

// contentionError marks an attempt lost to another writer of the same head.
type contentionError struct{ err error }

func (e *contentionError) Error() string { return "head contention: " + e.err.Error() }
func (e *contentionError) Unwrap() error { return e.err }

func isContention(err error) bool {
	var c *contentionError
	return errors.As(err, &c)
}

// batchCallerError: these requests' own writes cancelled the transaction
// (DynamoDB may report several at once).
type batchCallerError struct {
	failed map[int]*CallerWriteError // by request index
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
			if code == "TransactionConflict" || (i < len(owners) && owners[i].role == roleHead && code == "ConditionalCheckFailed") {
				return &contentionError{err}
			}
		}
		callers := &batchCallerError{failed: map[int]*CallerWriteError{}}
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
	var tip *types.TransactionInProgressException
	if errors.As(err, &tc) || errors.As(err, &tip) {
		return &contentionError{err}
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" {
		return &splitError{fmt.Errorf("transaction refused by DynamoDB: %w", err)}
	}
	return fmt.Errorf("transact write: %w", err)
}

// checkAlone refuses an Emit that cannot fit a transaction even alone, and
// records its size for batching.
func (s *Store) checkAlone(r *request) error {
	if n := 2 + len(r.extra); n > maxActions {
		return fmt.Errorf("%d extra writes + head + event = %d actions; a transaction holds at most %d: %w",
			len(r.extra), n, maxActions, ErrTooLarge)
	}
	item, err := sizeOfEvent(r)
	if err != nil {
		return err
	}
	size := item
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
	c := r.env
	c.Seq, c.PrevHash, c.Hash = 1, zeroHash, zeroHash
	it, err := c.ToItem()
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

// numberSize: one byte per two significant digits, plus one.
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
