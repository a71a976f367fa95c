package reconcile

import (
	"context"
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

// Checkpoint is the last event an intact walk verified.
type Checkpoint struct {
	Seq  int64
	Hash string
}

// Walk is the progress of a walk that ran out of budget.
type Walk struct {
	ID        string
	Tenant    string
	Mode      Mode
	Seq       int64  // the last event verified (0: none yet, from genesis)
	Hash      string // its hash
	Verified  int64  // events re-hashed so far
	AnchorSeq int64  // the checkpoint the walk trusted (0: from genesis)
	ExpiresAt time.Time
}

// State keeps checkpoints and walk rows. Implementations must be safe for
// concurrent use; AdvanceCheckpoint must be atomic, because concurrent
// reconciles race on it.
type State interface {
	// Checkpoint returns the tenant's checkpoint, or nil.
	Checkpoint(ctx context.Context, tenant string) (*Checkpoint, error)
	// AdvanceCheckpoint stores cp unless the stored checkpoint is already at
	// or past cp.Seq; a checkpoint never moves back.
	AdvanceCheckpoint(ctx context.Context, tenant string, cp Checkpoint) error
	// SaveWalk stores a walk row until w.ExpiresAt.
	SaveWalk(ctx context.Context, w Walk) error
	// Walk returns the walk row, or nil when there is none.
	Walk(ctx context.Context, tenant, id string) (*Walk, error)
}

// StateDynamoDB is the part of the DynamoDB API DynamoState uses.
type StateDynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// DynamoState keeps checkpoints and walk rows in the state table (layout in
// pkg/keys: pk checkpoint#<tenant>, sk "checkpoint" or walk#<id>).
type DynamoState struct {
	db    StateDynamoDB
	table string
	now   func() time.Time
}

var _ State = (*DynamoState)(nil)

// NewDynamoState returns a State on the state table named table.
func NewDynamoState(db StateDynamoDB, table string) *DynamoState {
	return &DynamoState{db: db, table: table, now: time.Now}
}

func sAV(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func nAV(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func stateKey(tenant, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{keys.AttrPK: sAV(keys.StateCheckpointPrefix + tenant), keys.AttrSK: sAV(sk)}
}

func (d *DynamoState) get(ctx context.Context, tenant, sk string) (map[string]types.AttributeValue, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.table), Key: stateKey(tenant, sk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

func (d *DynamoState) Checkpoint(ctx context.Context, tenant string) (*Checkpoint, error) {
	it, err := d.get(ctx, tenant, keys.StateCheckpointSK)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint of tenant %q: %w", tenant, err)
	}
	if it == nil {
		return nil, nil
	}
	seq, err := numAttr(it, keys.AttrSeq)
	if err != nil {
		return nil, fmt.Errorf("checkpoint of tenant %q: %w", tenant, err)
	}
	return &Checkpoint{Seq: seq, Hash: strAttr(it, keys.AttrHash)}, nil
}

func (d *DynamoState) AdvanceCheckpoint(ctx context.Context, tenant string, cp Checkpoint) error {
	it := stateKey(tenant, keys.StateCheckpointSK)
	it[keys.AttrTenant] = sAV(tenant)
	it[keys.AttrSeq] = nAV(cp.Seq)
	it[keys.AttrHash] = sAV(cp.Hash)
	it[keys.AttrUpdatedAt] = sAV(d.now().UTC().Format(time.RFC3339Nano))
	_, err := d.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(d.table), Item: it,
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #seq < :seq"),
		ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK, "#seq": keys.AttrSeq},
		ExpressionAttributeValues: map[string]types.AttributeValue{":seq": nAV(cp.Seq)},
	})
	// A concurrent walk already moved it as far or further: not an error.
	if ccf := (*types.ConditionalCheckFailedException)(nil); errors.As(err, &ccf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("advance checkpoint of tenant %q to seq %d: %w", tenant, cp.Seq, err)
	}
	return nil
}

func (d *DynamoState) SaveWalk(ctx context.Context, w Walk) error {
	it := stateKey(w.Tenant, keys.StateWalkSKPrefix+w.ID)
	it[keys.AttrTenant] = sAV(w.Tenant)
	it[keys.AttrMode] = sAV(string(w.Mode))
	it[keys.AttrSeq] = nAV(w.Seq)
	it[keys.AttrHash] = sAV(w.Hash)
	it[keys.AttrVerified] = nAV(w.Verified)
	it[keys.AttrAnchorSeq] = nAV(w.AnchorSeq)
	it[keys.AttrExpiresAt] = nAV(w.ExpiresAt.Unix())
	it[keys.AttrUpdatedAt] = sAV(d.now().UTC().Format(time.RFC3339Nano))
	if _, err := d.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(d.table), Item: it}); err != nil {
		return fmt.Errorf("save walk of tenant %q: %w", w.Tenant, err)
	}
	return nil
}

func (d *DynamoState) Walk(ctx context.Context, tenant, id string) (*Walk, error) {
	it, err := d.get(ctx, tenant, keys.StateWalkSKPrefix+id)
	if err != nil {
		return nil, fmt.Errorf("read walk of tenant %q: %w", tenant, err)
	}
	if it == nil {
		return nil, nil
	}
	w := &Walk{ID: id, Tenant: tenant, Mode: Mode(strAttr(it, keys.AttrMode)), Hash: strAttr(it, keys.AttrHash)}
	var exp int64
	for name, dst := range map[string]*int64{keys.AttrSeq: &w.Seq, keys.AttrVerified: &w.Verified, keys.AttrAnchorSeq: &w.AnchorSeq, keys.AttrExpiresAt: &exp} {
		if *dst, err = numAttr(it, name); err != nil {
			return nil, fmt.Errorf("walk of tenant %q: %w", tenant, err)
		}
	}
	w.ExpiresAt = time.Unix(exp, 0)
	return w, nil
}

func strAttr(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func numAttr(it map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("%s missing or not a number", name)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", name, v.Value, err)
	}
	return n, nil
}

// MemoryState is an in-memory State (and Rounds) for tests.
type MemoryState struct {
	mu     sync.Mutex
	cps    map[string]Checkpoint
	walks  map[string]Walk
	rounds map[Mode]Round
}

var (
	_ State  = (*MemoryState)(nil)
	_ Rounds = (*MemoryState)(nil)
)

// NewMemoryState returns an empty MemoryState.
func NewMemoryState() *MemoryState {
	return &MemoryState{cps: map[string]Checkpoint{}, walks: map[string]Walk{}, rounds: map[Mode]Round{}}
}

func (m *MemoryState) Round(_ context.Context, mode Mode) (Round, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rd, ok := m.rounds[mode]; ok {
		return rd, nil
	}
	return Round{Mode: mode}, nil
}

func (m *MemoryState) SaveRound(_ context.Context, prev, next Round) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rounds[next.Mode].Version != prev.Version {
		return fmt.Errorf("save %s round at version %d: %w", next.Mode, prev.Version, ErrRoundMoved)
	}
	m.rounds[next.Mode] = next
	return nil
}

func (m *MemoryState) Checkpoint(_ context.Context, tenant string) (*Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp, ok := m.cps[tenant]
	if !ok {
		return nil, nil
	}
	return &cp, nil
}

func (m *MemoryState) AdvanceCheckpoint(_ context.Context, tenant string, cp Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.cps[tenant]; !ok || old.Seq < cp.Seq {
		m.cps[tenant] = cp
	}
	return nil
}

func (m *MemoryState) SaveWalk(_ context.Context, w Walk) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.walks[w.Tenant+"\x00"+w.ID] = w
	return nil
}

func (m *MemoryState) Walk(_ context.Context, tenant, id string) (*Walk, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.walks[tenant+"\x00"+id]
	if !ok {
		return nil, nil
	}
	return &w, nil
}
