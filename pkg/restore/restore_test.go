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
