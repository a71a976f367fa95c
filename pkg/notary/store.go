package notary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// StoreDynamoDB is the part of the DynamoDB API DynamoStore uses.
type StoreDynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// DynamoStore keeps chain states in the state table (pkg/keys, "notary
// chain"). Reconcile reads them with Load.
type DynamoStore struct {
	db    StoreDynamoDB
	table string
	now   func() time.Time
}

var _ Store = (*DynamoStore)(nil)

// NewDynamoStore returns a Store on the state table named table.
func NewDynamoStore(db StoreDynamoDB, table string) *DynamoStore {
	return &DynamoStore{db: db, table: table, now: time.Now}
}

func stateKey(chainName string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateNotaryPrefix + chainName},
		keys.AttrSK: &types.AttributeValueMemberS{Value: keys.StateNotarySK},
	}
}

func nAV(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// Load reads a chain's state (strongly consistent), or nil.
func (d *DynamoStore) Load(ctx context.Context, chainName string) (*State, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: stateKey(chainName), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	if out.Item == nil {
		return nil, nil
	}
	it := out.Item
	st := &State{Chain: chainName}
	for name, dst := range map[string]*int64{keys.AttrSeq: &st.Seq, keys.AttrNotaryHeadSeq: &st.HeadSeq, keys.AttrNotarySigned: &st.Signed,
		keys.AttrRoundVersion: &st.Version} {
		n, ok := it[name].(*types.AttributeValueMemberN)
		if !ok {
			return nil, fmt.Errorf("notary row of chain %q: %s is not a number", chainName, name)
		}
		if *dst, err = strconv.ParseInt(n.Value, 10, 64); err != nil {
			return nil, fmt.Errorf("notary row of chain %q: %s: %w", chainName, name, err)
		}
	}
	if n, ok := it[keys.AttrNotaryFindings].(*types.AttributeValueMemberN); ok {
		f, _ := strconv.Atoi(n.Value)
		st.Findings = f
	}
	if n, ok := it[keys.AttrNotarySince].(*types.AttributeValueMemberN); ok {
		if st.Since, err = strconv.ParseInt(n.Value, 10, 64); err != nil {
			return nil, fmt.Errorf("notary row of chain %q: %s: %w", chainName, keys.AttrNotarySince, err)
		}
	}
	for name, dst := range map[string]*string{keys.AttrHash: &st.Hash, keys.AttrLastHash: &st.HeadHash,
		keys.AttrNotaryStreamSeq: &st.StreamSeq, keys.AttrNotaryLastFinding: &st.LastFinding, keys.AttrNotaryFirstFinding: &st.FirstFinding} {
		if s, ok := it[name].(*types.AttributeValueMemberS); ok {
			*dst = s.Value
		}
	}
	if b, ok := it[keys.AttrNotaryBroken].(*types.AttributeValueMemberBOOL); ok {
		st.Broken = b.Value
	}
	for name, dst := range map[string]any{keys.AttrNotaryPending: &st.Pending, keys.AttrNotaryApplied: &st.Applied} {
		if p, ok := it[name].(*types.AttributeValueMemberS); ok {
			if err := json.Unmarshal([]byte(p.Value), dst); err != nil {
				return nil, fmt.Errorf("notary row of chain %q: %s: %w", chainName, name, err)
			}
		}
	}
	return st, nil
}

// Save writes st if its row is still at st.Version, and bumps st.Version.
func (d *DynamoStore) Save(ctx context.Context, st *State) error {
	pending, err := json.Marshal(st.Pending)
	if err != nil {
		return err
	}
	applied, err := json.Marshal(st.Applied)
	if err != nil {
		return err
	}
	it := stateKey(st.Chain)
	it[keys.AttrTenant] = &types.AttributeValueMemberS{Value: st.Chain}
	it[keys.AttrSeq] = nAV(st.Seq)
	it[keys.AttrHash] = &types.AttributeValueMemberS{Value: st.Hash}
	it[keys.AttrNotaryHeadSeq] = nAV(st.HeadSeq)
	it[keys.AttrLastHash] = &types.AttributeValueMemberS{Value: st.HeadHash}
	it[keys.AttrNotarySigned] = nAV(st.Signed)
	it[keys.AttrNotarySince] = nAV(st.Since)
	it[keys.AttrNotaryPending] = &types.AttributeValueMemberS{Value: string(pending)}
	it[keys.AttrNotaryApplied] = &types.AttributeValueMemberS{Value: string(applied)}
	it[keys.AttrNotaryBroken] = &types.AttributeValueMemberBOOL{Value: st.Broken}
	it[keys.AttrNotaryFindings] = nAV(int64(st.Findings))
	it[keys.AttrRoundVersion] = nAV(st.Version + 1)
	it[keys.AttrUpdatedAt] = &types.AttributeValueMemberS{Value: d.now().UTC().Format(time.RFC3339Nano)}
	if st.StreamSeq != "" {
		it[keys.AttrNotaryStreamSeq] = &types.AttributeValueMemberS{Value: st.StreamSeq}
	}
	if st.LastFinding != "" {
		it[keys.AttrNotaryLastFinding] = &types.AttributeValueMemberS{Value: st.LastFinding}
	}
	if st.FirstFinding != "" {
		it[keys.AttrNotaryFirstFinding] = &types.AttributeValueMemberS{Value: st.FirstFinding}
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(d.table), Item: it,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": keys.AttrPK}}
	if st.Version > 0 {
		in.ConditionExpression = aws.String("#v = :v")
		in.ExpressionAttributeNames = map[string]string{"#v": keys.AttrRoundVersion}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": nAV(st.Version)}
	}
	_, err = d.db.PutItem(ctx, in)
	if ccf := (*types.ConditionalCheckFailedException)(nil); errors.As(err, &ccf) {
		return fmt.Errorf("chain %q at version %d: %w", st.Chain, st.Version, ErrConflict)
	}
	if err != nil {
		return err
	}
	st.Version++
	return nil
}

// MemoryStore is a Store in memory, for unit tests.
type MemoryStore struct {
	mu   sync.Mutex
	rows map[string]State
}

var _ Store = (*MemoryStore)(nil)

// Load returns a copy of the chain's state, or nil.
func (m *MemoryStore) Load(_ context.Context, chainName string) (*State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.rows[chainName]
	if !ok {
		return nil, nil
	}
	st.Pending = append([]Pending(nil), st.Pending...)
	st.Applied = append([]string(nil), st.Applied...)
	return &st, nil
}

// Save stores a copy of st if the stored version is st.Version.
func (m *MemoryStore) Save(_ context.Context, st *State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rows == nil {
		m.rows = map[string]State{}
	}
	if m.rows[st.Chain].Version != st.Version {
		return fmt.Errorf("chain %q at version %d: %w", st.Chain, st.Version, ErrConflict)
	}
	st.Version++
	c := *st
	c.Pending = append([]Pending(nil), st.Pending...)
	c.Applied = append([]string(nil), st.Applied...)
	m.rows[st.Chain] = c
	return nil
}
