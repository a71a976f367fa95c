package ddb

import (
	"github.com/fourlanes/fourlanes/twin/ddb/attr"

	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/google/uuid"
)

// The control plane: CreateTable, DescribeTable, DeleteTable, ListTables, UpdateTable
// (streams only), UpdateTimeToLive, DescribeTimeToLive.
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_CreateTable.html

func init() {
	register(targetDynamoDB+"CreateTable", opCreateTable)
	register(targetDynamoDB+"DescribeTable", opDescribeTable)
	register(targetDynamoDB+"DeleteTable", opDeleteTable)
	register(targetDynamoDB+"ListTables", opListTables)
	register(targetDynamoDB+"UpdateTable", opUpdateTable)
	register(targetDynamoDB+"UpdateTimeToLive", opUpdateTimeToLive)
	register(targetDynamoDB+"DescribeTimeToLive", opDescribeTimeToLive)
}

type attrDefJSON struct {
	AttributeName string
	AttributeType string
}

type keySchemaJSON struct {
	AttributeName string
	KeyType       string
}

type projectionJSON struct {
	ProjectionType   string   `json:",omitempty"`
	NonKeyAttributes []string `json:",omitempty"`
}

type indexJSON struct {
	IndexName             string
	KeySchema             []keySchemaJSON
	Projection            projectionJSON
	ProvisionedThroughput *throughputJSON `json:",omitempty"`
}

type throughputJSON struct {
	ReadCapacityUnits  int64
	WriteCapacityUnits int64
}

type streamSpecJSON struct {
	StreamEnabled  bool
	StreamViewType string `json:",omitempty"`
}

type createTableInput struct {
	TableName              string
	AttributeDefinitions   []attrDefJSON
	KeySchema              []keySchemaJSON
	GlobalSecondaryIndexes []indexJSON
	LocalSecondaryIndexes  []indexJSON
	StreamSpecification    *streamSpecJSON
	BillingMode            string
	ProvisionedThroughput  *throughputJSON
	// Accepted and ignored: AWS-side settings with no local meaning.
	SSESpecification          any
	Tags                      any
	TableClass                string
	DeletionProtectionEnabled bool
	OnDemandThroughput        any
	WarmThroughput            any
	ResourcePolicy            string
}

var tableNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

func opCreateTable(ctx context.Context, db *DB, body []byte) (any, error) {
	var in createTableInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkTableName(in.TableName, "tableName"); err != nil {
		return nil, err
	}
	if err := checkBillingMode(in.BillingMode); err != nil {
		return nil, err
	}
	if err := checkKeyNames(in.AttributeDefinitions, in.KeySchema, in.GlobalSecondaryIndexes, in.LocalSecondaryIndexes); err != nil {
		return nil, err
	}
	defs := map[string]attr.Kind{}
	var attrDefs []KeyDef
	for _, a := range in.AttributeDefinitions {
		k := attr.KindOf(a.AttributeType)
		if k != attr.KindS && k != attr.KindN && k != attr.KindB {
			return nil, validationf("1 validation error detected: Value '%s' at 'attributeDefinitions.attributeType' failed to satisfy constraint: Member must satisfy enum value set: [B, N, S]", a.AttributeType)
		}
		if _, dup := defs[a.AttributeName]; dup {
			return nil, validationf("Cannot have two attributes with the same name. Attribute name: %s", a.AttributeName)
		}
		defs[a.AttributeName] = k
		attrDefs = append(attrDefs, KeyDef{Name: a.AttributeName, Type: k})
	}
	used := map[string]bool{}
	hash, rng, err := keySchema(in.KeySchema, defs, used, "")
	if err != nil {
		return nil, err
	}
	now := db.now()
	t := &Table{
		Name: in.TableName, ARN: db.arn("table/" + in.TableName), ID: uuid.NewString(), Created: now,
		Hash: hash, Range: rng, attrDefs: attrDefs, items: newTree(), billing: "PROVISIONED",
	}
	if in.BillingMode == "PAY_PER_REQUEST" {
		t.billing = "PAY_PER_REQUEST"
	}
	seen := map[string]bool{}
	var gsis, lsis []*Index
	for _, g := range in.GlobalSecondaryIndexes {
		ix, err := newIndex(g, defs, used, true, seen)
		if err != nil {
			return nil, err
		}
		gsis = append(gsis, ix)
	}
	for _, l := range in.LocalSecondaryIndexes {
		ix, err := newIndex(l, defs, used, false, seen)
		if err != nil {
			return nil, err
		}
		if ix.Hash.Name != hash.Name || rng.Name == "" {
			return nil, validationf("One or more parameter values were invalid: Table KeySchema does not have a range key, which is required when specifying a LocalSecondaryIndex")
		}
		lsis = append(lsis, ix)
	}
	t.setIndexes(gsis, lsis)
	for name := range defs {
		if !used[name] {
			return nil, validationf("One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
		}
	}
	if s := in.StreamSpecification; s != nil && s.StreamEnabled {
		if err := checkViewType(s.StreamViewType); err != nil {
			return nil, err
		}
		t.stream = newStream(db, t, s.StreamViewType, now)
		t.streams = append(t.streams, t.stream)
	}
	j := db.begin()
	db.mu.Lock()
	if _, exists := db.tables[t.Name]; exists {
		db.commit(j)
		db.mu.Unlock()
		return nil, newError(http.StatusBadRequest, CodeResourceInUse, "Table already exists: %s", t.Name)
	}
	j.table(t)
	db.tables[t.Name] = t
	err = db.commit(j)
	db.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return map[string]any{"TableDescription": t.describe()}, nil
}

// maxKeyNameLen is the longest name of a key attribute (table or index) or of the
// TTL attribute: 255 characters. AWS documents it for secondary index keys and
// enforces it for the table's keys and UpdateTimeToLive too (observed; public
// compatibility suites run against AWS check it).
const maxKeyNameLen = 255

func keyNameError(name, param string) error {
	if name == "" {
		return validationf("1 validation error detected: Value '' at '%s' failed to satisfy constraint: Member must have length greater than or equal to 1", param)
	}
	return validationf("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length less than or equal to %d", name, param, maxKeyNameLen)
}

func badKeyName(name string) bool { return name == "" || len(name) > maxKeyNameLen }

// checkKeyNames refuses a key attribute name that is empty or longer than 255
// characters, wherever CreateTable names one, before anything else is checked.
func checkKeyNames(defs []attrDefJSON, ks []keySchemaJSON, gsis, lsis []indexJSON) error {
	for i, d := range defs {
		if badKeyName(d.AttributeName) {
			return keyNameError(d.AttributeName, fmt.Sprintf("attributeDefinitions.%d.member.attributeName", i+1))
		}
	}
	for i, k := range ks {
		if badKeyName(k.AttributeName) {
			return keyNameError(k.AttributeName, fmt.Sprintf("keySchema.%d.member.attributeName", i+1))
		}
	}
	for _, ixs := range [][]indexJSON{gsis, lsis} {
		for _, ix := range ixs {
			for i, k := range ix.KeySchema {
				if badKeyName(k.AttributeName) {
					return keyNameError(k.AttributeName, fmt.Sprintf("keySchema.%d.member.attributeName", i+1))
				}
			}
		}
	}
	return nil
}

func checkBillingMode(v string) error {
	return checkEnum("billingMode", v, "PROVISIONED", "PAY_PER_REQUEST")
}

func checkViewType(v string) error {
	switch v {
	case "KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES":
		return nil
	}
	return validationf("1 validation error detected: Value '%s' at 'streamSpecification.streamViewType' failed to satisfy constraint: Member must satisfy enum value set: [NEW_IMAGE, OLD_IMAGE, NEW_AND_OLD_IMAGES, KEYS_ONLY]", v)
}

func keySchema(ks []keySchemaJSON, defs map[string]attr.Kind, used map[string]bool, index string) (hash, rng KeyDef, err error) {
	where := "Table"
	if index != "" {
		where = "Index " + index
	}
	if len(ks) == 0 || len(ks) > 2 || ks[0].KeyType != "HASH" || (len(ks) == 2 && ks[1].KeyType != "RANGE") {
		return hash, rng, validationf("1 validation error detected: %s KeySchema must have one HASH key, optionally followed by one RANGE key", where)
	}
	for i, k := range ks {
		typ, ok := defs[k.AttributeName]
		if !ok {
			return hash, rng, validationf("One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions. Keys: [%s], AttributeDefinitions: [%s]", k.AttributeName, defNames(defs))
		}
		used[k.AttributeName] = true
		if i == 0 {
			hash = KeyDef{Name: k.AttributeName, Type: typ}
		} else {
			if k.AttributeName == hash.Name {
				return hash, rng, validationf("Both the Hash Key and the Range Key element in the KeySchema have the same name")
			}
			rng = KeyDef{Name: k.AttributeName, Type: typ}
		}
	}
	return hash, rng, nil
}

func defNames(defs map[string]attr.Kind) string {
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func newIndex(j indexJSON, defs map[string]attr.Kind, used map[string]bool, global bool, seen map[string]bool) (*Index, error) {
	if !tableNameRE.MatchString(j.IndexName) {
		return nil, validationf("Invalid index name: %q", j.IndexName)
	}
	if seen[j.IndexName] {
		return nil, validationf("One or more parameter values were invalid: Duplicate index name: %s", j.IndexName)
	}
	seen[j.IndexName] = true
	h, r, err := keySchema(j.KeySchema, defs, used, j.IndexName)
	if err != nil {
		return nil, err
	}
	pt := j.Projection.ProjectionType
	switch pt {
	case "ALL", "KEYS_ONLY":
		if len(j.Projection.NonKeyAttributes) > 0 {
			return nil, validationf("One or more parameter values were invalid: ProjectionType is %s, but NonKeyAttributes is specified", pt)
		}
	case "INCLUDE":
		if len(j.Projection.NonKeyAttributes) == 0 {
			return nil, validationf("One or more parameter values were invalid: ProjectionType is INCLUDE, but NonKeyAttributes is not specified")
		}
	default:
		return nil, validationf("One or more parameter values were invalid: Unknown ProjectionType: %q", pt)
	}
	return &Index{Name: j.IndexName, Global: global, Hash: h, Range: r, ProjectionType: pt, NonKey: j.Projection.NonKeyAttributes, items: newTree(), status: indexActive}, nil
}

type tableNameInput struct {
	TableName string
}

// namedTable decodes a request that names only a table and finds the table.
func (db *DB) namedTable(body []byte) (*Table, error) {
	var in tableNameInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	return db.table(in.TableName)
}

func opDescribeTable(ctx context.Context, db *DB, body []byte) (any, error) {
	t, err := db.namedTable(body)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return map[string]any{"Table": t.describe()}, nil
}

func opDeleteTable(ctx context.Context, db *DB, body []byte) (any, error) {
	var in tableNameInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, err := db.tableName(in.TableName)
	if err != nil {
		return nil, err
	}
	j := db.begin()
	db.mu.Lock()
	t := db.tables[name]
	if t == nil {
		db.commit(j)
		db.mu.Unlock()
		return nil, notFoundf("Requested resource not found: Table: %s not found", name)
	}
	// db.mu is held until the drop is logged, so a CreateTable of the same name
	// is logged after it.
	delete(db.tables, name)
	t.mu.Lock()
	t.deleted = true
	now := db.now()
	if t.stream != nil {
		t.stream.disable(now)
	}
	d := t.describe()
	j.drop(name, now)
	err = db.commit(j)
	t.mu.Unlock()
	db.mu.Unlock()
	if err != nil {
		return nil, err
	}
	d["TableStatus"] = "DELETING"
	return map[string]any{"TableDescription": d}, nil
}

type listTablesInput struct {
	ExclusiveStartTableName string
	Limit                   int
}

func opListTables(ctx context.Context, db *DB, body []byte) (any, error) {
	var in listTablesInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.Limit == 0 {
		in.Limit = 100
	}
	if in.Limit < 1 || in.Limit > 100 {
		return nil, validationf("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 100", in.Limit)
	}
	names := []string{}
	for _, t := range db.Tables() {
		if t.Name > in.ExclusiveStartTableName {
			names = append(names, t.Name)
		}
	}
	out := map[string]any{}
	if len(names) > in.Limit {
		names = names[:in.Limit]
		out["LastEvaluatedTableName"] = names[len(names)-1]
	}
	out["TableNames"] = names
	return out, nil
}

type updateTableInput struct {
	TableName           string
	StreamSpecification *streamSpecJSON
	BillingMode         string
	// Accepted and ignored, as AWS-side settings.
	ProvisionedThroughput     any
	DeletionProtectionEnabled *bool
	SSESpecification          any
	TableClass                string
	OnDemandThroughput        any
	WarmThroughput            any
	// The definitions of a new GSI's key attributes (index.go).
	AttributeDefinitions        []attrDefJSON
	GlobalSecondaryIndexUpdates []gsiUpdateJSON
	// Refused: a local endpoint has no replicas.
	ReplicaUpdates []any
}

func opUpdateTable(ctx context.Context, db *DB, body []byte) (any, error) {
	var in updateTableInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.StreamSpecification == nil && in.BillingMode == "" && in.ProvisionedThroughput == nil && in.DeletionProtectionEnabled == nil &&
		in.SSESpecification == nil && in.TableClass == "" && in.OnDemandThroughput == nil && in.WarmThroughput == nil &&
		len(in.GlobalSecondaryIndexUpdates) == 0 && len(in.ReplicaUpdates) == 0 {
		// AWS refuses an UpdateTable that asks for no change (observed; the
		// wording is ours).
		return nil, validationf("UpdateTable requires at least one of ProvisionedThroughput, BillingMode, StreamSpecification, GlobalSecondaryIndexUpdates, SSESpecification, ReplicaUpdates, TableClass or DeletionProtectionEnabled")
	}
	if err := checkBillingMode(in.BillingMode); err != nil {
		return nil, err
	}
	if len(in.ReplicaUpdates) > 0 {
		return nil, validationf("UpdateTable: ReplicaUpdates are not supported by this local DynamoDB (it has no other regions)")
	}
	gu, err := parseGSIUpdates(in.GlobalSecondaryIndexUpdates, in.AttributeDefinitions)
	if err != nil {
		return nil, err
	}
	t, err := db.table(in.TableName)
	if err != nil {
		return nil, err
	}
	j := db.begin()
	t.mu.Lock()
	defer t.mu.Unlock()
	defer func() { db.commit(j) }() // releases the journal on every return; the success path commits first
	if t.deleted {
		return nil, notFoundf("Requested resource not found: Table: %s not found", t.Name)
	}
	// Everything is checked before anything changes, so a refused part leaves the
	// rest of the call undone too.
	if s := in.StreamSpecification; s != nil {
		switch {
		case s.StreamEnabled && t.stream != nil:
			return nil, validationf("Table already has an enabled stream: %s", t.stream.ARN)
		case s.StreamEnabled:
			if err := checkViewType(s.StreamViewType); err != nil {
				return nil, err
			}
		case t.stream == nil:
			return nil, validationf("Table already has its stream disabled")
		}
	}
	if gu != nil {
		start, err := db.applyGSIUpdate(t, gu)
		if err != nil {
			return nil, err
		}
		defer start() // the index's build, once the table's lock is released
	}
	if s := in.StreamSpecification; s != nil {
		now := db.now()
		switch {
		case s.StreamEnabled:
			t.stream = newStream(db, t, s.StreamViewType, now)
			t.streams = append(t.streams, t.stream)
		default:
			t.stream.disable(now)
			t.stream = nil
		}
	}
	if in.BillingMode != "" {
		t.billing = in.BillingMode
	}
	j.table(t)
	if err := db.commit(j); err != nil {
		return nil, err
	}
	j = nil
	return map[string]any{"TableDescription": t.describe()}, nil
}

type ttlSpecJSON struct {
	AttributeName string
	Enabled       bool
}

func opUpdateTimeToLive(ctx context.Context, db *DB, body []byte) (any, error) {
	var in struct {
		TableName               string
		TimeToLiveSpecification *ttlSpecJSON
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s := in.TimeToLiveSpecification
	if s == nil || s.AttributeName == "" {
		return nil, validationf("1 validation error detected: Value null at 'timeToLiveSpecification.attributeName' failed to satisfy constraint: Member must not be null")
	}
	if len(s.AttributeName) > maxKeyNameLen {
		return nil, keyNameError(s.AttributeName, "timeToLiveSpecification.attributeName")
	}
	t, err := db.table(in.TableName)
	if err != nil {
		return nil, err
	}
	j := db.begin()
	t.mu.Lock()
	defer t.mu.Unlock()
	defer func() { db.commit(j) }()
	switch {
	case s.Enabled && t.ttlAttr != "":
		return nil, validationf("TimeToLive is already enabled")
	case !s.Enabled && t.ttlAttr == "":
		return nil, validationf("TimeToLive is already disabled")
	case !s.Enabled && t.ttlAttr != s.AttributeName:
		return nil, validationf("TimeToLive is enabled on attribute %s, not %s", t.ttlAttr, s.AttributeName)
	case s.Enabled:
		t.ttlAttr = s.AttributeName
	default:
		t.ttlAttr = ""
	}
	j.table(t)
	if err := db.commit(j); err != nil {
		return nil, err
	}
	j = nil
	return map[string]any{"TimeToLiveSpecification": s}, nil
}

func opDescribeTimeToLive(ctx context.Context, db *DB, body []byte) (any, error) {
	t, err := db.namedTable(body)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	d := map[string]any{"TimeToLiveStatus": "DISABLED"}
	if t.ttlAttr != "" {
		d = map[string]any{"TimeToLiveStatus": "ENABLED", "AttributeName": t.ttlAttr}
	}
	return map[string]any{"TimeToLiveDescription": d}, nil
}

// describe returns the TableDescription. The caller holds t.mu.
func (t *Table) describe() map[string]any {
	ks := func(h, r KeyDef) []keySchemaJSON {
		out := []keySchemaJSON{{AttributeName: h.Name, KeyType: "HASH"}}
		if r.Name != "" {
			out = append(out, keySchemaJSON{AttributeName: r.Name, KeyType: "RANGE"})
		}
		return out
	}
	defs := make([]attrDefJSON, 0, len(t.attrDefs))
	for _, d := range t.attrDefs {
		defs = append(defs, attrDefJSON{AttributeName: d.Name, AttributeType: d.Type.String()})
	}
	d := map[string]any{
		"TableName":                 t.Name,
		"TableArn":                  t.ARN,
		"TableId":                   t.ID,
		"TableStatus":               "ACTIVE",
		"CreationDateTime":          float64(t.Created.UnixMilli()) / 1000,
		"KeySchema":                 ks(t.Hash, t.Range),
		"AttributeDefinitions":      defs,
		"ItemCount":                 t.items.Len(),
		"TableSizeBytes":            t.sizeBytes,
		"DeletionProtectionEnabled": false,
	}
	if t.billing == "PAY_PER_REQUEST" {
		d["BillingModeSummary"] = map[string]any{"BillingMode": "PAY_PER_REQUEST"}
		d["ProvisionedThroughput"] = throughputJSON{}
	} else {
		d["ProvisionedThroughput"] = throughputJSON{ReadCapacityUnits: 5, WriteCapacityUnits: 5}
	}
	// A table is UPDATING while an index of it is allocated or deleted ("The
	// table/index configuration is being updated. The table/index remains
	// available for data operations when UPDATING.", TableDescription), and
	// ACTIVE again while a new index backfills: waiting for the table to be
	// ACTIVE and then for the index is how AWS's examples wait for an index.
	status := "ACTIVE"
	ixs := func(list []*Index) []map[string]any {
		var out []map[string]any
		for _, ix := range list {
			m := map[string]any{
				"IndexName":      ix.Name,
				"IndexArn":       t.ARN + "/index/" + ix.Name,
				"KeySchema":      ks(ix.Hash, ix.Range),
				"Projection":     projectionJSON{ProjectionType: ix.ProjectionType, NonKeyAttributes: ix.NonKey},
				"ItemCount":      ix.items.Len(),
				"IndexSizeBytes": 0,
			}
			if ix.Global {
				m["IndexStatus"] = ix.status
				if ix.online && ix.status == indexCreating {
					m["Backfilling"] = ix.backfilling
				}
				if (ix.status == indexCreating && !ix.backfilling) || ix.status == indexDeleting {
					status = "UPDATING"
				}
			}
			out = append(out, m)
		}
		return out
	}
	gsis := append(append([]*Index(nil), t.GSIs()...), t.deleting...)
	if len(gsis) > 0 {
		d["GlobalSecondaryIndexes"] = ixs(gsis)
	}
	if lsis := t.LSIs(); len(lsis) > 0 {
		d["LocalSecondaryIndexes"] = ixs(lsis)
	}
	d["TableStatus"] = status
	if t.stream != nil {
		d["StreamSpecification"] = streamSpecJSON{StreamEnabled: true, StreamViewType: t.stream.ViewType}
		d["LatestStreamArn"] = t.stream.ARN
		d["LatestStreamLabel"] = t.stream.Label
	} else if n := len(t.streams); n > 0 {
		d["LatestStreamArn"] = t.streams[n-1].ARN
		d["LatestStreamLabel"] = t.streams[n-1].Label
	}
	return d
}
