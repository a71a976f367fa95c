package ddb

import (
	"github.com/fourlanes/fourlanes/twin/ddb/attr"

	"fmt"
	"net/http"
)

// Error is a DynamoDB error as the JSON 1.0 protocol sends it: HTTP status, a
// `__type` of "com.amazonaws.dynamodb.v20120810#<Code>" and a message. SDKs map Code
// to their typed errors (ConditionalCheckFailedException, …).
type Error struct {
	Status  int
	Code    string
	Message string

	// Item is the item returned with ConditionalCheckFailedException when the request
	// asked for ReturnValuesOnConditionCheckFailure=ALL_OLD (nil otherwise).
	Item attr.Item
	// Reasons is TransactionCanceledException's CancellationReasons, one per action in order.
	Reasons []CancellationReason
}

// CancellationReason is one action's outcome in a cancelled transaction.
type CancellationReason struct {
	Code    string    `json:"Code"`
	Message string    `json:"Message,omitempty"`
	Item    attr.Item `json:"Item,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The error codes this server sends.
const (
	CodeValidation             = "ValidationException"
	CodeResourceNotFound       = "ResourceNotFoundException"
	CodeResourceInUse          = "ResourceInUseException"
	CodeConditionalCheckFailed = "ConditionalCheckFailedException"
	CodeTransactionCanceled    = "TransactionCanceledException"
	CodeTransactionConflict    = "TransactionConflictException"
	CodeTransactionInProgress  = "TransactionInProgressException"
	CodeIdempotentMismatch     = "IdempotentParameterMismatchException"
	CodeProvisionedThroughput  = "ProvisionedThroughputExceededException"
	CodeThrottling             = "ThrottlingException"
	CodeInternalServerError    = "InternalServerError"
	CodeUnknownOperation       = "UnknownOperationException"
	CodeSerialization          = "SerializationException"
	CodeExpiredIterator        = "ExpiredIteratorException"
	CodeTrimmedDataAccess      = "TrimmedDataAccessException"
	CodeItemCollectionSize     = "ItemCollectionSizeLimitExceededException"
)

func newError(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// validationf returns a ValidationException (HTTP 400) with the message formatted.
func validationf(format string, args ...any) *Error {
	return newError(http.StatusBadRequest, CodeValidation, format, args...)
}

// notFoundf returns a ResourceNotFoundException (HTTP 400).
func notFoundf(format string, args ...any) *Error {
	return newError(http.StatusBadRequest, CodeResourceNotFound, format, args...)
}
