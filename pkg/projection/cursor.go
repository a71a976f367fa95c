package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Progress is where a compare or a rebuild stopped, saved so that the next
// run resumes there.
type Progress struct {
	Phase   string    `json:"phase"`            // the pass under way
	Cursor  string    `json:"cursor,omitempty"` // within Phase ("" = its start)
	Started time.Time `json:"started"`
	// Counts so far, so that a report spans every run of one pass.
	Counts map[string]int `json:"counts,omitempty"`
}

// Cursors keeps Progress per projection and run kind ("compare",
// "rebuild"). Implementations must be safe for concurrent use.
type Cursors interface {
	Load(ctx context.Context, projection, kind string) (Progress, bool, error)
	Save(ctx context.Context, projection, kind string, p Progress) error
	Clear(ctx context.Context, projection, kind string) error
}

// StateCursors keeps Progress in the state table (pk projrun#<projection>,
// sk <kind>).
type StateCursors struct {
	DB    DynamoDB
	Table string
}

var _ Cursors = (*StateCursors)(nil)

func (c *StateCursors) key(projection, kind string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{keys.AttrPK: sv(keys.StateProjRunPrefix + projection), keys.AttrSK: sv(kind)}
}

// Load reads saved progress.
func (c *StateCursors) Load(ctx context.Context, projection, kind string) (Progress, bool, error) {
	out, err := c.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.Table), Key: c.key(projection, kind), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Progress{}, false, fmt.Errorf("load %s %s progress: %w", projection, kind, err)
	}
	raw, ok := out.Item[AttrProgress].(*types.AttributeValueMemberS)
	if !ok {
		return Progress{}, false, nil
	}
	var p Progress
	if err := json.Unmarshal([]byte(raw.Value), &p); err != nil {
		return Progress{}, false, fmt.Errorf("load %s %s progress: %w", projection, kind, err)
	}
	return p, true, nil
}

// Save writes progress.
func (c *StateCursors) Save(ctx context.Context, projection, kind string, p Progress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("save %s %s progress: %w", projection, kind, err)
	}
	item := c.key(projection, kind)
	item[AttrProgress] = sv(string(b))
	item[keys.AttrUpdatedAt] = sv(envelope.FormatTime(time.Now()))
	if _, err := c.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(c.Table), Item: item}); err != nil {
		return fmt.Errorf("save %s %s progress: %w", projection, kind, err)
	}
	return nil
}

// Clear removes progress (the pass finished).
func (c *StateCursors) Clear(ctx context.Context, projection, kind string) error {
	if _, err := c.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(c.Table), Key: c.key(projection, kind)}); err != nil {
		return fmt.Errorf("clear %s %s progress: %w", projection, kind, err)
	}
	return nil
}

// AttrProgress holds a saved Progress, as JSON (state table).
const AttrProgress = "progress"

// MemoryCursors keeps Progress in memory (tests).
type MemoryCursors struct {
	mu sync.Mutex
	m  map[string]Progress
}

var _ Cursors = (*MemoryCursors)(nil)

// Load reads saved progress.
func (c *MemoryCursors) Load(_ context.Context, projection, kind string) (Progress, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[projection+"\x00"+kind]
	return p, ok, nil
}

// Save writes progress.
func (c *MemoryCursors) Save(_ context.Context, projection, kind string, p Progress) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]Progress{}
	}
	c.m[projection+"\x00"+kind] = p
	return nil
}

// Clear removes progress.
func (c *MemoryCursors) Clear(_ context.Context, projection, kind string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, projection+"\x00"+kind)
	return nil
}
