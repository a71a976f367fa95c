package projection_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/projection"
)

var loanEntity = catalog.Entity{Name: "LOAN", TableEnv: "LOANS_TABLE", TenantAttr: "tenant", IDAttr: "loan_id", VersionAttr: "version"}

// loansTable creates a tracked table keyed (tenant, loan_id) in our DynamoDB.
func loansTable(t *testing.T, db *dynamodb.Client) string {
	t.Helper()
	name := localaws.UniqueName(t, "loans")
	localaws.CreateTable(t, db, &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("tenant"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("loan_id"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("tenant"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("loan_id"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	return name
}

func putLoan(t *testing.T, db *dynamodb.Client, table, tenant, id string, v int64, status string) {
	t.Helper()
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"tenant": &types.AttributeValueMemberS{Value: tenant}, "loan_id": &types.AttributeValueMemberS{Value: id},
		"version": &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}, "status": &types.AttributeValueMemberS{Value: status},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

func shelfShape(item map[string]any) (map[string]any, error) {
	return map[string]any{"status": item["status"]}, nil
}

type loanRig struct {
	db      *dynamodb.Client
	loans   string
	src     *projection.TableSource
	store   *projection.Table
	p       *projection.Projector
	logs    *bytes.Buffer
	metrics *bytes.Buffer
}

func newLoanRig(t *testing.T) *loanRig {
	t.Helper()
	db := localaws.DynamoDB(t)
	rg := &loanRig{db: db, loans: loansTable(t, db), logs: &bytes.Buffer{}, metrics: &bytes.Buffer{}}
	rg.src = &projection.TableSource{DB: db, Table: rg.loans, Entity: loanEntity}
	rg.store = &projection.Table{DB: db, Table: table(t, db, "shelf"), StateTable: table(t, db, "state"), Entity: "LOAN", Name: "shelf"}
	rg.p = &projection.Projector{Name: "shelf", Entity: "LOAN", Store: rg.store, Shape: shelfShape,
		Logger: obs.NewLogger(rg.logs, "info"), Metrics: obs.NewMetrics(rg.metrics)}
	return rg
}

func (rg *loanRig) row(t *testing.T, tenant, id string) string {
	t.Helper()
	r, ok, err := rg.store.Get(context.Background(), tenant, "LOAN", id)
	switch {
	case err != nil:
		t.Fatal(err)
	case !ok:
		return "absent"
	case r.Deleted:
		return fmt.Sprintf("tombstone@%d", r.Version)
	}
	return fmt.Sprintf("%v@%d", r.Item["status"], r.Version)
}

// TestCompareRepairsWhatDiverged: each kind of divergence between the
// loans table and the projection is found, repaired and reported; a row
// ahead of its source is reported and left alone. The compare runs one
// page at a time, resuming from its cursor in the state table.
func TestCompareRepairsWhatDiverged(t *testing.T) {
	rg := newLoanRig(t)
	ctx := context.Background()
	apply := func(id string, v int64, status string) {
		t.Helper()
		if err := rg.p.Apply(ctx, "t1", projection.Change{Entity: "LOAN", ID: id, Version: v, Item: map[string]any{"status": status}}); err != nil {
			t.Fatal(err)
		}
	}
	// l1 agrees. l2's v2 and v3 were lost. l3 never reached the projection.
	// l4's row was rewritten by hand. l5 was deleted and the delete lost.
	// l6's row is ahead of the table.
	putLoan(t, rg.db, rg.loans, "t1", "l1", 2, "returned")
	apply("l1", 1, "open")
	apply("l1", 2, "returned")
	putLoan(t, rg.db, rg.loans, "t1", "l2", 3, "returned")
	apply("l2", 1, "open")
	putLoan(t, rg.db, rg.loans, "t1", "l3", 1, "open")
	putLoan(t, rg.db, rg.loans, "t1", "l4", 1, "open")
	apply("l4", 1, "open")
	if ok, err := rg.store.Put(ctx, projection.Row{Tenant: "t1", Entity: "LOAN", ID: "l4", Version: 1, Item: map[string]any{"status": "lost"}}, 1, true); !ok || err != nil {
		t.Fatalf("plant divergent row: %v %v", ok, err)
	}
	apply("l5", 1, "open")
	putLoan(t, rg.db, rg.loans, "t1", "l6", 1, "open")
	for v := int64(1); v <= 3; v++ {
		apply("l6", v, "open")
	}

	cursors := &projection.StateCursors{DB: rg.db, Table: rg.store.StateTable}
	var rep projection.CompareReport
	runs := 0
	for ; runs < 20 && !rep.Done; runs++ {
		var err error
		if rep, err = rg.p.Compare(ctx, projection.CompareOptions{Source: rg.src, Cursors: cursors, PageSize: 2, Pages: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if runs < 3 {
		t.Errorf("compare finished in %d runs of one page, want several (it must resume)", runs)
	}
	want := projection.CompareReport{Checked: 11, Ahead: 1, Done: true, Repaired: map[string]int{
		projection.FaultBehind: 1, projection.FaultMissing: 1, projection.FaultDivergent: 1, projection.FaultOrphaned: 1}}
	if d := cmp.Diff(want, rep); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
	for id, want := range map[string]string{"l1": "returned@2", "l2": "returned@3", "l3": "open@1", "l4": "open@1", "l5": "tombstone@1", "l6": "open@3"} {
		if got := rg.row(t, "t1", id); got != want {
			t.Errorf("%s after the compare: %s, want %s", id, got, want)
		}
	}
	for _, s := range []string{`"msg":"projection row repaired from its source"`, `"fault":"divergent"`, `"fault":"orphaned"`,
		`"level":"ERROR"`, "ahead of its source", `"id":"l6"`} {
		if !strings.Contains(rg.logs.String(), s) {
			t.Errorf("logs lack %s:\n%s", s, rg.logs.String())
		}
	}
	for _, s := range []string{keys.MetricProjRepaired, `"Fault":"missing"`, keys.MetricProjAhead} {
		if !strings.Contains(rg.metrics.String(), s) {
			t.Errorf("metrics lack %s", s)
		}
	}
	if _, ok, err := cursors.Load(ctx, "shelf", "compare"); ok || err != nil {
		t.Errorf("a finished compare left its cursor (%v, %v)", ok, err)
	}

	// A second pass finds nothing to repair.
	rep, err := rg.p.Compare(ctx, projection.CompareOptions{Source: rg.src, Cursors: cursors})
	if err != nil || !rep.Done || len(rep.Repaired) != 0 || rep.Ahead != 1 {
		t.Errorf("second compare: %+v, %v; want done, nothing repaired, l6 still ahead", rep, err)
	}
}

// TestCompareFailsLoudlyAndKeepsItsPlace: a source that cannot be read
// fails the run, and the saved cursor lets the next run resume.
func TestCompareFailsLoudlyAndKeepsItsPlace(t *testing.T) {
	rg := newLoanRig(t)
	ctx := context.Background()
	for i := range 5 {
		putLoan(t, rg.db, rg.loans, "t1", fmt.Sprintf("l%d", i), 1, "open")
	}
	cursors := &projection.MemoryCursors{}
	if _, err := rg.p.Compare(ctx, projection.CompareOptions{Source: rg.src, Cursors: cursors, PageSize: 2, Pages: 1}); err != nil {
		t.Fatal(err)
	}
	before, ok, _ := cursors.Load(ctx, "shelf", "compare")
	if !ok || before.Cursor == "" {
		t.Fatalf("no cursor saved after one page: %+v", before)
	}
	broken := *rg.src
	broken.Table = "no-such-table"
	_, err := rg.p.Compare(ctx, projection.CompareOptions{Source: &broken, Cursors: cursors, PageSize: 2})
	if err == nil || !strings.Contains(err.Error(), "shelf: compare") {
		t.Fatalf("compare over a missing table: %v, want an error naming the projection", err)
	}
	after, _, _ := cursors.Load(ctx, "shelf", "compare")
	if after.Cursor != before.Cursor || after.Phase != before.Phase {
		t.Errorf("a failed run moved the cursor: %+v, want %+v", after, before)
	}
	rep, err := rg.p.Compare(ctx, projection.CompareOptions{Source: rg.src, Cursors: cursors, PageSize: 2})
	if err != nil || !rep.Done || rep.Repaired[projection.FaultMissing] != 5 {
		t.Errorf("resumed compare: %+v, %v; want done with 5 missing rows repaired over both runs", rep, err)
	}
	if _, err := rg.p.Compare(ctx, projection.CompareOptions{}); err == nil || !strings.Contains(err.Error(), "Source is required") {
		t.Errorf("compare without a source: %v, want an error naming Source", err)
	}
}

// TestCompareReportsABadRowAndGoesOn: a row that does not decode is an
// error naming it, and every other row is still compared and repaired.
func TestCompareReportsABadRowAndGoesOn(t *testing.T) {
	rg := newLoanRig(t)
	ctx := context.Background()
	putLoan(t, rg.db, rg.loans, "t1", "bad", 1, "open")
	putLoan(t, rg.db, rg.loans, "t1", "ok", 1, "open")
	_, err := rg.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(rg.store.Table), Item: map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: "t1"}, keys.AttrSK: &types.AttributeValueMemberS{Value: "bad"},
		keys.AttrVersion: &types.AttributeValueMemberN{Value: "1"}, projection.AttrDoc: &types.AttributeValueMemberS{Value: "{corrupt"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rg.p.Compare(ctx, projection.CompareOptions{Source: rg.src, PageSize: 1})
	var bad *projection.BadRowError
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("got %v, want a BadRowError naming the row", err)
	}
	if !rep.Done || rep.Repaired[projection.FaultMissing] != 1 {
		t.Errorf("report %+v, want done with the missing row repaired", rep)
	}
	if got := rg.row(t, "t1", "ok"); got != "open@1" {
		t.Errorf("ok after the compare: %s, want open@1", got)
	}
}
