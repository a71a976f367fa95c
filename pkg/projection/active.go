package projection

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Active is the durable pointer to the version of a projection its readers
// read: one item in the state table,
//
//	active version   pk projrun#<projection>   sk "active"
//
// with the version (AttrActiveVersion), the one before it
// (AttrPreviousVersion) and when it switched (keys.AttrUpdatedAt). Without
// the item, Default is active. A rebuild switches it once the shadow has
// caught up (RebuildOptions.Active); readers resolve it through Versions,
// each process caching it for CacheFor, so every reader has moved within
// CacheFor of the switch. The previous version's table is left as it was:
// switching back (Switch(to, from)) is the rollback.
type Active struct {
	DB         DynamoDB
	Table      string // the state table
	Projection string
	Default    string        // the version active before any switch
	CacheFor   time.Duration // default DefaultActiveCache
	Now        func() time.Time

	mu      sync.Mutex
	version string
	read    time.Time
}

// DefaultActiveCache is how long a reader trusts the active version it read.
const DefaultActiveCache = 5 * time.Second

// Attributes of the active-version item.
const (
	AttrActiveVersion   = "active_version"
	AttrPreviousVersion = "previous_version"
	activeSK            = "active"
)

// ErrSwitchRaced: the active version is not the one a switch expected.
var ErrSwitchRaced = errors.New("the projection's active version is not the one the switch expected")

func (a *Active) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Active) key() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{keys.AttrPK: sv(keys.StateProjRunPrefix + a.Projection), keys.AttrSK: sv(activeSK)}
}

// Read reads the active version with a consistent read, past the cache.
func (a *Active) Read(ctx context.Context) (string, error) {
	out, err := a.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(a.Table), Key: a.key(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("%s: read the active version: %w", a.Projection, err)
	}
	v := a.Default
	if s, ok := out.Item[AttrActiveVersion].(*types.AttributeValueMemberS); ok {
		v = s.Value
	}
	if v == "" {
		return "", fmt.Errorf("%s: no active version: none was switched to and Active.Default is empty", a.Projection)
	}
	return v, nil
}

// Version is the active version, as read at most CacheFor ago.
func (a *Active) Version(ctx context.Context) (string, error) {
	cache := a.CacheFor
	if cache <= 0 {
		cache = DefaultActiveCache
	}
	a.mu.Lock()
	v, at := a.version, a.read
	a.mu.Unlock()
	if v != "" && a.now().Sub(at) < cache {
		return v, nil
	}
	v, err := a.Read(ctx)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	a.version, a.read = v, a.now()
	a.mu.Unlock()
	return v, nil
}

// Switch makes to the active version if from is (one conditional write;
// ErrSwitchRaced otherwise). Switching to the active version is a no-op.
func (a *Active) Switch(ctx context.Context, from, to string) error {
	if to == "" || from == "" {
		return fmt.Errorf("%s: switch from %q to %q: both versions are required", a.Projection, from, to)
	}
	cur, err := a.Read(ctx)
	if err != nil {
		return err
	}
	if cur == to {
		return nil
	}
	if cur != from {
		return fmt.Errorf("%s: switch from %s to %s: %s is active: %w", a.Projection, from, to, cur, ErrSwitchRaced)
	}
	item := a.key()
	item[AttrActiveVersion], item[AttrPreviousVersion] = sv(to), sv(from)
	item[keys.AttrUpdatedAt] = sv(envelope.FormatTime(a.now()))
	cond, names, values := "attribute_not_exists(#pk) OR #v = :from", map[string]string{"#pk": keys.AttrPK, "#v": AttrActiveVersion},
		map[string]types.AttributeValue{":from": sv(from)}
	if from != a.Default {
		cond = "#v = :from"
		delete(names, "#pk")
	}
	_, err = a.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(a.Table), Item: item,
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%s: switch from %s to %s: %w", a.Projection, from, to, ErrSwitchRaced)
	}
	if err != nil {
		return fmt.Errorf("%s: switch from %s to %s: %w", a.Projection, from, to, err)
	}
	a.mu.Lock()
	a.version, a.read = to, a.now()
	a.mu.Unlock()
	return nil
}

// Versions is what a projection's readers read: the Store of the active
// version (Active), among every version's Store.
type Versions struct {
	Active *Active
	Stores map[string]Store // version → its store
}

// Follow is what a reader of t's projection reads: the table of its active
// version, through the pointer (Active) named t.Name in t.StateTable.
// tables maps each version to its table, each read with t's keys and
// entity; current is the version active before any switch. A reader
// deployed without the active version's table reads nothing: every read is
// an error naming that version.
func (t *Table) Follow(current string, tables map[string]string) *Versions {
	stores := make(map[string]Store, len(tables))
	for version, table := range tables {
		v := *t
		v.Table = table
		stores[version] = &v
	}
	return &Versions{Active: &Active{DB: t.DB, Table: t.StateTable, Projection: t.Name, Default: current}, Stores: stores}
}

// Store resolves the active version's store.
func (v *Versions) Store(ctx context.Context) (Store, string, error) {
	name, err := v.Active.Version(ctx)
	if err != nil {
		return nil, "", err
	}
	st, ok := v.Stores[name]
	if !ok {
		return nil, name, fmt.Errorf("%s: the active version %q has no store here: deploy the readers with it (Versions.Stores) before switching", v.Active.Projection, name)
	}
	return st, name, nil
}

// Get reads a row from the active version.
func (v *Versions) Get(ctx context.Context, tenant, entity, id string) (Row, bool, error) {
	st, _, err := v.Store(ctx)
	if err != nil {
		return Row{}, false, err
	}
	return st.Get(ctx, tenant, entity, id)
}

// Rows pages through the active version's rows. A page's cursor belongs to
// the version it was read from: a reader paging across a switch starts
// again.
func (v *Versions) Rows(ctx context.Context, cursor string, limit int) ([]Row, string, error) {
	st, _, err := v.Store(ctx)
	if err != nil {
		return nil, "", err
	}
	return st.Rows(ctx, cursor, limit)
}
