package restore_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/restore"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// TestKindOfCoversEveryStatePrefix: every state-table row kind pkg/keys
// spells (a State…Prefix or State…PK constant) has a kind here, so a new
// kind of row cannot be added without deciding whether a restore copies it.
func TestKindOfCoversEveryStatePrefix(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "keys", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				id := name.Name
				if !strings.HasPrefix(id, "State") || strings.Contains(id, "SK") || !(strings.HasSuffix(id, "Prefix") || strings.HasSuffix(id, "PK")) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Errorf("keys.%s is not a string literal", id)
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				found++
				pk := v
				if strings.HasSuffix(id, "Prefix") {
					pk += "acme"
				}
				if k := restore.KindOf(pk); k == restore.Unknown {
					t.Errorf("keys.%s (%q): restore.KindOf gives no kind: decide whether a restore copies these rows (pkg/restore)", id, v)
				}
			}
			return true
		})
	}
	if found < 14 {
		t.Fatalf("found %d state-table row kinds in pkg/keys, want every one (at least 14)", found)
	}
	if k := restore.KindOf("something#else"); k != restore.Unknown {
		t.Errorf("KindOf(something#else) = %s, want unknown", k)
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func row(pk, sk string, attrs ...any) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{keys.AttrPK: s(pk), keys.AttrSK: s(sk)}
	for i := 0; i+1 < len(attrs); i += 2 {
		it[attrs[i].(string)] = attrs[i+1].(types.AttributeValue)
	}
	return it
}

func claimItem(eventID, sub, status string, attrs ...any) map[string]types.AttributeValue {
	return row(keys.StateEventClaimPrefix+eventID, keys.StateEventClaimSK, append([]any{keys.AttrTenant, s("acme"),
		keys.AttrSubClaimPrefix + sub, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{keys.ClaimFieldStatus: s(status)}}}, attrs...)...)
}

func put(t *testing.T, db *dynamodb.Client, table string, items ...map[string]types.AttributeValue) {
	t.Helper()
	for _, it := range items {
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
}

func scan(t *testing.T, db *dynamodb.Client, table string) map[string]map[string]types.AttributeValue {
	t.Helper()
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]map[string]types.AttributeValue{}
	for _, it := range out.Items {
		m[it[keys.AttrPK].(*types.AttributeValueMemberS).Value+"|"+it[keys.AttrSK].(*types.AttributeValueMemberS).Value] = it
	}
	return m
}

// TestRunCopiesOnlyWhatLiveLacks, on our DynamoDB: from a restored copy,
// Run copies the claims, effects, watermarks, starts and unresolved dead
// letters the live table lacks; leaves every live row as it is (a newer
// claim entry stays); skips expired rows, dead letters resolved since (live
// claim completed, or in the history) and the kinds rebuilt by their owners
// (checkpoints, the notary's state, unknown rows); writes nothing without
// Apply; and a second run copies nothing.
func TestRunCopiesOnlyWhatLiveLacks(t *testing.T) {
	db := localaws.DynamoDB(t)
	ctx := context.Background()
	live := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "live"))).TableName)
	restored := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "restored"))).TableName)
	const sub = "notifications.order-email"
	now := time.Now()
	future, past := n(now.Add(24*time.Hour).Unix()), n(now.Add(-time.Hour).Unix())
	put(t, db, restored,
		claimItem("e1", sub, keys.ClaimCompleted, keys.AttrExpiresAt, future), // deleted from live: copied
		claimItem("e2", sub, keys.ClaimPending, keys.AttrExpiresAt, future),   // live has a newer one: stays
		claimItem("e3", sub, keys.ClaimCompleted, keys.AttrExpiresAt, past),   // expired: not copied
		row(keys.StateEffectPrefix+"e1:"+sub+":email", keys.StateEffectSK, keys.AttrStatus, s(keys.EffectDone)),
		row(keys.StateWatermarkPrefix+"acme", sub, keys.AttrSeq, n(7)),
		row(keys.StateSubStartPK, sub, keys.AttrStart, s("all")),
		row(keys.StateDeadPrefix+"acme", "e4:"+sub, keys.AttrDeadIndex, s(keys.DeadIndexValue), keys.AttrTenant, s("acme")), // open: copied
		row(keys.StateDeadPrefix+"acme", "e5:"+sub, keys.AttrDeadIndex, s(keys.DeadIndexValue)),                             // live claim completed
		row(keys.StateDeadPrefix+"acme", "e6:"+sub, keys.AttrDeadIndex, s(keys.DeadIndexValue)),                             // in the live history
		row(keys.StateCheckpointPrefix+"acme", keys.StateCheckpointSK, keys.AttrSeq, n(7)),
		row(keys.StateNotaryPrefix+"acme", keys.StateNotarySK, keys.AttrSeq, n(7)),
		row("mystery#1", "x"),
	)
	put(t, db, live,
		claimItem("e2", sub, keys.ClaimCompleted, keys.AttrExpiresAt, future),
		claimItem("e5", sub, keys.ClaimCompleted, keys.AttrExpiresAt, future),
		row(keys.StateDeadLogPrefix+"acme", "e6:"+sub, keys.AttrResolvedHow, s(keys.ResolvedReplayed)),
	)
	before := scan(t, db, live)

	cfg := restore.Config{DB: db, From: restored, To: live}
	dry, err := restore.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := scan(t, db, live); len(got) != len(before) {
		t.Fatalf("a run without Apply wrote: %d live rows, want %d", len(got), len(before))
	}
	want := map[restore.Kind]restore.Count{
		restore.Claims:      {Restored: 3, Present: 1, Copied: 1, Expired: 1},
		restore.Effects:     {Restored: 1, Copied: 1},
		restore.Watermarks:  {Restored: 1, Copied: 1},
		restore.Starts:      {Restored: 1, Copied: 1},
		restore.DeadLetters: {Restored: 3, Copied: 1, Resolved: 2},
	}
	check := func(name string, r restore.Report, want map[restore.Kind]restore.Count, copied int) {
		t.Helper()
		for _, k := range restore.Copied {
			if got := *r.Kinds[k]; got != want[k] {
				t.Errorf("%s: %s: %+v, want %+v", name, k, got, want[k])
			}
		}
		if r.Copied != copied {
			t.Errorf("%s: copied %d, want %d", name, r.Copied, copied)
		}
		for k, c := range map[restore.Kind]int{restore.Checkpoints: 1, restore.NotaryState: 1, restore.Unknown: 1} {
			if r.NotCopied[k] != c {
				t.Errorf("%s: not copied %s: %d, want %d (%v)", name, k, r.NotCopied[k], c, r.NotCopied)
			}
		}
		if len(r.UnknownKeys) != 1 || r.UnknownKeys[0] != "mystery#1" {
			t.Errorf("%s: unknown keys %v, want [mystery#1]", name, r.UnknownKeys)
		}
	}
	check("dry run", dry, want, 5)
	if dry.Applied {
		t.Error("dry run reports applied")
	}

	cfg.Apply = true
	r, err := restore.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	check("apply", r, want, 5)
	after := scan(t, db, live)
	for _, k := range []string{
		keys.StateEventClaimPrefix + "e1|" + keys.StateEventClaimSK,
		keys.StateEffectPrefix + "e1:" + sub + ":email|" + keys.StateEffectSK,
		keys.StateWatermarkPrefix + "acme|" + sub,
		keys.StateSubStartPK + "|" + sub,
		keys.StateDeadPrefix + "acme|e4:" + sub,
	} {
		if after[k] == nil {
			t.Errorf("live table lacks %s after the restore", k)
		}
	}
	for _, k := range []string{
		keys.StateEventClaimPrefix + "e3|" + keys.StateEventClaimSK,
		keys.StateDeadPrefix + "acme|e5:" + sub, keys.StateDeadPrefix + "acme|e6:" + sub,
		keys.StateCheckpointPrefix + "acme|" + keys.StateCheckpointSK, keys.StateNotaryPrefix + "acme|" + keys.StateNotarySK, "mystery#1|x",
	} {
		if after[k] != nil {
			t.Errorf("the restore copied %s, which it must not", k)
		}
	}
	e2 := after[keys.StateEventClaimPrefix+"e2|"+keys.StateEventClaimSK]
	st := e2[keys.AttrSubClaimPrefix+sub].(*types.AttributeValueMemberM).Value[keys.ClaimFieldStatus].(*types.AttributeValueMemberS).Value
	if st != keys.ClaimCompleted {
		t.Errorf("the live claim of e2 became %s: a live row was overwritten", st)
	}
	if len(after) != len(before)+5 {
		t.Errorf("%d live rows after, want %d", len(after), len(before)+5)
	}

	again, err := restore.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want2 := map[restore.Kind]restore.Count{
		restore.Claims:      {Restored: 3, Present: 2, Expired: 1},
		restore.Effects:     {Restored: 1, Present: 1},
		restore.Watermarks:  {Restored: 1, Present: 1},
		restore.Starts:      {Restored: 1, Present: 1},
		restore.DeadLetters: {Restored: 3, Present: 1, Resolved: 2},
	}
	check("second run", again, want2, 0)
}

// TestRunFailsLoud: a restored table or a live table that cannot be read
// is an error naming it, never an empty success.
func TestRunFailsLoud(t *testing.T) {
	db := localaws.DynamoDB(t)
	ctx := context.Background()
	table := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "t"))).TableName)
	put(t, db, table, row(keys.StateWatermarkPrefix+"acme", "s", keys.AttrSeq, n(1)))
	missing := localaws.UniqueName(t, "missing")
	for _, c := range []restore.Config{
		{DB: db, From: missing, To: table, Apply: true},
		{DB: db, From: table, To: missing, Apply: true},
		{DB: db, From: table, To: table, Apply: true},
	} {
		if _, err := restore.Run(ctx, c); err == nil {
			t.Errorf("Run from %s to %s: no error", c.From, c.To)
		} else if want := missing; c.From != c.To && !strings.Contains(err.Error(), want) {
			t.Errorf("Run from %s to %s: %v, want it to name %s", c.From, c.To, err, want)
		}
	}
}

func entry(status string) types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{keys.ClaimFieldStatus: s(status), keys.ClaimFieldAttempts: n(1)}}
}

func claimWith(eventID string, attrs ...any) map[string]types.AttributeValue {
	return row(keys.StateEventClaimPrefix+eventID, keys.StateEventClaimSK, append([]any{keys.AttrTenant, s("acme")}, attrs...)...)
}

func status(t *testing.T, it map[string]types.AttributeValue, sub string) string {
	t.Helper()
	e, ok := it[keys.AttrSubClaimPrefix+sub].(*types.AttributeValueMemberM)
	if !ok {
		return ""
	}
	return e.Value[keys.ClaimFieldStatus].(*types.AttributeValueMemberS).Value
}

// TestRunMergesMissingClaimEntries, on our DynamoDB: a claim item the live
// table has, lacking subscription entries the restored one has, gets those
// entries (a dead one with its dead set, the item's TTL gone), and only
// those: an entry the live item has stays as it is, even when the restored
// one says otherwise. The dry run counts the merge and writes nothing; a
// second run merges nothing.
func TestRunMergesMissingClaimEntries(t *testing.T) {
	db := localaws.DynamoDB(t)
	ctx := context.Background()
	live := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "live"))).TableName)
	restored := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "restored"))).TableName)
	future := n(time.Now().Add(24 * time.Hour).Unix())
	put(t, db, restored,
		claimWith("e1", keys.AttrSubClaimPrefix+"a", entry(keys.ClaimCompleted), keys.AttrSubClaimPrefix+"b", entry(keys.ClaimCompleted),
			keys.AttrSubClaimPrefix+"c", entry(keys.ClaimDead), keys.AttrDeadSubs, &types.AttributeValueMemberSS{Value: []string{"c"}}),
		claimWith("e2", keys.AttrSubClaimPrefix+"a", entry(keys.ClaimCompleted), keys.AttrSubClaimPrefix+"b", entry(keys.ClaimCompleted), keys.AttrExpiresAt, future),
	)
	put(t, db, live,
		claimWith("e1", keys.AttrSubClaimPrefix+"a", entry(keys.ClaimPending), keys.AttrExpiresAt, future),
		claimWith("e2", keys.AttrSubClaimPrefix+"a", entry(keys.ClaimCompleted), keys.AttrExpiresAt, future),
	)
	cfg := restore.Config{DB: db, From: restored, To: live}
	dry, err := restore.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *dry.Kinds[restore.Claims], (restore.Count{Restored: 2, Merged: 2, Entries: 3}); got != want {
		t.Errorf("dry run claims: %+v, want %+v", got, want)
	}
	if dry.Merged != 2 || dry.Copied != 0 {
		t.Errorf("dry run: merged %d, copied %d, want 2 and 0", dry.Merged, dry.Copied)
	}
	if e1 := scan(t, db, live)[keys.StateEventClaimPrefix+"e1|"+keys.StateEventClaimSK]; status(t, e1, "b") != "" {
		t.Fatalf("the dry run merged an entry: %v", e1)
	}

	cfg.Apply = true
	r, err := restore.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *r.Kinds[restore.Claims], (restore.Count{Restored: 2, Merged: 2, Entries: 3}); got != want {
		t.Errorf("apply claims: %+v, want %+v", got, want)
	}
	after := scan(t, db, live)
	e1, e2 := after[keys.StateEventClaimPrefix+"e1|"+keys.StateEventClaimSK], after[keys.StateEventClaimPrefix+"e2|"+keys.StateEventClaimSK]
	for _, c := range []struct {
		it        map[string]types.AttributeValue
		sub, want string
	}{{e1, "a", keys.ClaimPending}, {e1, "b", keys.ClaimCompleted}, {e1, "c", keys.ClaimDead}, {e2, "a", keys.ClaimCompleted}, {e2, "b", keys.ClaimCompleted}} {
		if got := status(t, c.it, c.sub); got != c.want {
			t.Errorf("%s entry %s after the merge: %q, want %q", str(c.it, keys.AttrPK), c.sub, got, c.want)
		}
	}
	if ds, ok := e1[keys.AttrDeadSubs].(*types.AttributeValueMemberSS); !ok || len(ds.Value) != 1 || ds.Value[0] != "c" {
		t.Errorf("e1's dead set after merging a dead entry: %v, want [c]", e1[keys.AttrDeadSubs])
	}
	if _, ok := e1[keys.AttrExpiresAt]; ok {
		t.Error("e1 keeps its TTL with a dead entry merged in: a dead claim must never expire")
	}
	if _, ok := e2[keys.AttrExpiresAt]; !ok {
		t.Error("e2 lost its TTL, with no dead entry merged in")
	}
	var got delivery.ClaimRecord
	got, found, err := delivery.NewDynamoStore(db, live).Get(ctx, delivery.Key{EventID: "e1", Subscription: "b"})
	if err != nil || !found || got.Status != delivery.StatusCompleted {
		t.Errorf("delivery reads e1/b after the merge: %+v, found %v, %v; want completed", got, found, err)
	}

	again, err := restore.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *again.Kinds[restore.Claims], (restore.Count{Restored: 2, Present: 2}); got != want {
		t.Errorf("second run claims: %+v, want %+v", got, want)
	}
}

func str(it map[string]types.AttributeValue, name string) string {
	v, _ := it[name].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

// racer runs before, once per merge write, just before the write: another
// writer changing the live claim item between the merge's read and its
// write.
type racer struct {
	*dynamodb.Client
	before func(n int)
	n      int
}

func (r *racer) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	r.n++
	r.before(r.n)
	return r.Client.UpdateItem(ctx, in, optFns...)
}

// TestRunMergeLosesNoConcurrentWrite: an entry another writer adds between
// the merge's read and its write is kept (the write is refused, the merge
// retries with what is still missing); an item deleted in between is
// copied whole; an item that changes under every write is a failure named
// in the error, never a silent success.
func TestRunMergeLosesNoConcurrentWrite(t *testing.T) {
	db := localaws.DynamoDB(t)
	ctx := context.Background()
	schema := func(name string) string {
		return aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, name))).TableName)
	}
	setEntry := func(table, sub, st string) {
		t.Helper()
		if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key:                      map[string]types.AttributeValue{keys.AttrPK: s(keys.StateEventClaimPrefix + "e1"), keys.AttrSK: s(keys.StateEventClaimSK)},
			UpdateExpression:         aws.String("SET #e = :e"),
			ExpressionAttributeNames: map[string]string{"#e": keys.AttrSubClaimPrefix + sub}, ExpressionAttributeValues: map[string]types.AttributeValue{":e": entry(st)},
		}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("entry added meanwhile", func(t *testing.T) {
		live, restored := schema("live"), schema("restored")
		put(t, db, restored, claimWith("e1", keys.AttrSubClaimPrefix+"a", entry(keys.ClaimCompleted), keys.AttrSubClaimPrefix+"b", entry(keys.ClaimCompleted),
			keys.AttrSubClaimPrefix+"c", entry(keys.ClaimCompleted)))
		put(t, db, live, claimWith("e1", keys.AttrSubClaimPrefix+"a", entry(keys.ClaimCompleted)))
		rdb := &racer{Client: db, before: func(n int) {
			if n == 1 {
				setEntry(live, "b", keys.ClaimPending) // a delivery claims b meanwhile
			}
		}}
		r, err := restore.Run(ctx, restore.Config{DB: rdb, From: restored, To: live, Apply: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := *r.Kinds[restore.Claims], (restore.Count{Restored: 1, Merged: 1, Entries: 1}); got != want {
			t.Errorf("claims: %+v, want %+v", got, want)
		}
		if rdb.n != 2 {
			t.Errorf("%d merge writes, want 2 (one refused, one retried)", rdb.n)
		}
		e1 := scan(t, db, live)[keys.StateEventClaimPrefix+"e1|"+keys.StateEventClaimSK]
		if got := status(t, e1, "b"); got != keys.ClaimPending {
			t.Errorf("b after the merge: %q, want the concurrent writer's pending", got)
		}
		if got := status(t, e1, "c"); got != keys.ClaimCompleted {
			t.Errorf("c after the merge: %q, want completed", got)
		}
	})

	t.Run("item deleted meanwhile", func(t *testing.T) {
		live, restored := schema("live"), schema("restored")
		put(t, db, restored, claimWith("e1", keys.AttrSubClaimPrefix+"a", entry(keys.ClaimCompleted), keys.AttrSubClaimPrefix+"b", entry(keys.ClaimCompleted)))
		put(t, db, live, claimWith("e1", keys.AttrSubClaimPrefix+"a", entry(keys.ClaimCompleted)))
		rdb := &racer{Client: db, before: func(int) {
			if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(live),
				Key: map[string]types.AttributeValue{keys.AttrPK: s(keys.StateEventClaimPrefix + "e1"), keys.AttrSK: s(keys.StateEventClaimSK)}}); err != nil {
				t.Fatal(err)
			}
		}}
		r, err := restore.Run(ctx, restore.Config{DB: rdb, From: restored, To: live, Apply: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := *r.Kinds[restore.Claims], (restore.Count{Restored: 1, Copied: 1}); got != want {
			t.Errorf("claims: %+v, want %+v", got, want)
		}
		e1 := scan(t, db, live)[keys.StateEventClaimPrefix+"e1|"+keys.StateEventClaimSK]
		if status(t, e1, "a") != keys.ClaimCompleted || status(t, e1, "b") != keys.ClaimCompleted {
			t.Errorf("e1 after the merge: %v, want the restored item whole", e1)
		}
	})

	t.Run("item changing under every write", func(t *testing.T) {
		live, restored := schema("live"), schema("restored")
		attrs := []any{}
		for i := range 12 {
			attrs = append(attrs, keys.AttrSubClaimPrefix+"s"+strconv.Itoa(i), entry(keys.ClaimCompleted))
		}
		put(t, db, restored, claimWith("e1", attrs...))
		put(t, db, live, claimWith("e1"))
		rdb := &racer{Client: db, before: func(n int) { setEntry(live, "s"+strconv.Itoa(n-1), keys.ClaimPending) }}
		r, err := restore.Run(ctx, restore.Config{DB: rdb, From: restored, To: live, Apply: true})
		if err == nil || !strings.Contains(err.Error(), keys.StateEventClaimPrefix+"e1") {
			t.Fatalf("Run: %v, want an error naming %se1", err, keys.StateEventClaimPrefix)
		}
		if got := r.Kinds[restore.Claims].Failed; got != 1 {
			t.Errorf("claims: %+v, want 1 failed", *r.Kinds[restore.Claims])
		}
		e1 := scan(t, db, live)[keys.StateEventClaimPrefix+"e1|"+keys.StateEventClaimSK]
		for i := range 8 {
			if got := status(t, e1, "s"+strconv.Itoa(i)); got != keys.ClaimPending {
				t.Errorf("s%d: %q, want the concurrent writer's pending", i, got)
			}
		}
	})
}
