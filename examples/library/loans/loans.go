// Package loans is the library's lending desk: it writes the loans table and
// announces each change in the same transaction (Emit with the write as an
// extra write), so no loan changes without its event and no event exists
// without its change. Its table is the tracked entity LOAN.
package loans

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
)

// Event types emitted by loans.
const (
	TypeOpened   = "loan.opened"
	TypeReturned = "loan.returned"
)

// Entity is the tracked entity of the loans table.
const Entity = "LOAN"

// EnvTable names the loans table in a function's environment.
const EnvTable = "LIBRARY_LOANS_TABLE"

// Attributes of a loan item.
const (
	AttrTenant  = "tenant"
	AttrID      = "loan_id"
	AttrVersion = "version"
	AttrBook    = "book"
	AttrMember  = "member"
	AttrStatus  = "status"
)

// Loan statuses.
const (
	StatusOpen     = "open"
	StatusReturned = "returned"
)

// Module declares what loans emits and tracks. It subscribes to nothing.
var Module = catalog.Module[catalog.NoHandlers]{
	Name: "loans",
	Doc:  "Lending desk. Writes the loans table and announces each change in the same transaction.",
	Emits: []catalog.EventType{
		catalog.Event[OpenedV1](TypeOpened, "A member borrowed a book."),
		catalog.Event[ReturnedV1](TypeReturned, "A member returned a borrowed book."),
	},
	Tracks: []catalog.Entity{
		{Name: Entity, Doc: "One item per loan in the loans table, versioned from 1.",
			TableEnv: EnvTable, TenantAttr: AttrTenant, IDAttr: AttrID, VersionAttr: AttrVersion},
	},
}

// OpenedV1 is loan.opened schema version 1. Email, where the member's
// reminders go, is personal data: the log keeps it sealed under the member's
// data key, and `fourlanes erase -subject <member>` erases it.
type OpenedV1 struct {
	LoanID string `json:"loan_id"`
	Book   string `json:"book"`
	Member string `json:"member" fourlanes:"subject"`
	Email  string `json:"email,omitempty" fourlanes:"personal"`
}

// ReturnedV1 is loan.returned schema version 1.
type ReturnedV1 struct {
	LoanID string `json:"loan_id"`
	Book   string `json:"book"`
	Member string `json:"member"`
}

// ErrStale: the loan changed since the caller read it (its version moved).
var ErrStale = errors.New("loan changed since it was read")

// Emitter is the part of eventstore.Store that loans uses.
type Emitter interface {
	Emit(ctx context.Context, eventType string, payload any, extra ...types.TransactWriteItem) (app.Envelope, error)
}

// Loan is one loan as the service returns it.
type Loan struct {
	ID      string
	Version int64
	Book    string
	Member  string
	Status  string
}

// Service opens and closes loans. The tenant (the library branch) comes from
// the context.
type Service struct {
	Events Emitter
	Table  string // the loans table
}

// Open lends book to member, whose reminders go to email (may be empty):
// the loan at version 1 and loan.opened, in one transaction.
func (s *Service) Open(ctx context.Context, book, member, email string) (Loan, error) {
	tenant, err := app.Tenant(ctx)
	if err != nil {
		return Loan{}, fmt.Errorf("open loan: %w", err)
	}
	l := Loan{ID: uuid.NewString(), Version: 1, Book: book, Member: member, Status: StatusOpen}
	put := types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.Table),
		Item: map[string]types.AttributeValue{
			AttrTenant:  &types.AttributeValueMemberS{Value: tenant},
			AttrID:      &types.AttributeValueMemberS{Value: l.ID},
			AttrVersion: &types.AttributeValueMemberN{Value: "1"},
			AttrBook:    &types.AttributeValueMemberS{Value: book},
			AttrMember:  &types.AttributeValueMemberS{Value: member},
			AttrStatus:  &types.AttributeValueMemberS{Value: StatusOpen},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#id)"),
		ExpressionAttributeNames: map[string]string{"#id": AttrID},
	}}
	if _, err := s.Events.Emit(ctx, TypeOpened, OpenedV1{LoanID: l.ID, Book: book, Member: member, Email: email}, put); err != nil {
		return l, fmt.Errorf("open loan: %w", err)
	}
	return l, nil
}

// Return closes l (as the caller read it): the loan moves to its next
// version and loan.returned is emitted, in one transaction. ErrStale if the
// loan changed since it was read.
func (s *Service) Return(ctx context.Context, l Loan) (Loan, error) {
	tenant, err := app.Tenant(ctx)
	if err != nil {
		return l, fmt.Errorf("return loan %s: %w", l.ID, err)
	}
	upd := types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.Table),
		Key: map[string]types.AttributeValue{
			AttrTenant: &types.AttributeValueMemberS{Value: tenant},
			AttrID:     &types.AttributeValueMemberS{Value: l.ID},
		},
		UpdateExpression:         aws.String("SET #v = :next, #st = :st"),
		ConditionExpression:      aws.String("#v = :from"),
		ExpressionAttributeNames: map[string]string{"#v": AttrVersion, "#st": AttrStatus},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":from": &types.AttributeValueMemberN{Value: strconv.FormatInt(l.Version, 10)},
			":next": &types.AttributeValueMemberN{Value: strconv.FormatInt(l.Version+1, 10)},
			":st":   &types.AttributeValueMemberS{Value: StatusReturned},
		},
	}}
	_, err = s.Events.Emit(ctx, TypeReturned, ReturnedV1{LoanID: l.ID, Book: l.Book, Member: l.Member}, upd)
	switch {
	case app.ConditionFailed(err):
		return l, fmt.Errorf("return loan %s: version %d: %w", l.ID, l.Version, ErrStale)
	case err != nil:
		return l, fmt.Errorf("return loan %s: %w", l.ID, err)
	}
	l.Version++
	l.Status = StatusReturned
	return l, nil
}
