package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/examples/library/shelf"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/projection"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// The library's stack keeps its shelf projection honest by itself: the
// hourly dlq-repair run, after its own work, compares the shelf with the
// loans table and sweeps its parks. A shelf row deleted and one rewritten by
// hand are repaired, and reported; a park whose gap the table cannot close,
// older than the threshold and near its TTL, is an ERROR line and an EMF
// count in dlq-repair's output, never a silent expiry.
func TestLibraryShelfKeptByDLQRepair(t *testing.T) {
	t.Parallel()
	s := startLibrary(t)
	ctx := context.Background()
	events, err := library.App.EventStore(s.ddb, s.env[keys.EnvEventsTable], s.vault(t))
	if err != nil {
		t.Fatal(err)
	}
	desk := &loans.Service{Events: events, Table: s.env[loans.EnvTable]}
	tctx, err := tenancy.WithTenant(ctx, "east-branch")
	if err != nil {
		t.Fatal(err)
	}
	var ls []loans.Loan
	for i := range 3 {
		l, err := desk.Open(tctx, fmt.Sprintf("isbn-%03d", i), "member-1", "")
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if l, err = desk.Return(tctx, l); err != nil {
				t.Fatal(err)
			}
		}
		ls = append(ls, l)
	}
	table := s.env[shelf.EnvTable]
	want := func(l loans.Loan) shelf.Row {
		return shelf.Row{Version: l.Version, Book: l.Book, OnShelf: l.Status == loans.StatusReturned}
	}
	eventually(t, 60*time.Second, "the shelf projection", func() (bool, string) {
		for _, l := range ls {
			if r, ok, err := shelf.Get(ctx, s.ddb, table, "east-branch", l.ID); err != nil || !ok || r != want(l) {
				return false, fmt.Sprintf("loan %s: %+v (found %v, %v), want %+v", l.ID, r, ok, err, want(l))
			}
		}
		return true, ""
	})

	// Loan 0's row is deleted; loan 1's says it is out; loan 2 has a park
	// at a version its table never reached, parked two hours ago with 12
	// hours to live.
	key := func(id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{loans.AttrTenant: &types.AttributeValueMemberS{Value: "east-branch"}, loans.AttrID: &types.AttributeValueMemberS{Value: id}}
	}
	if _, err := s.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key(ls[0].ID)}); err != nil {
		t.Fatal(err)
	}
	out := key(ls[1].ID)
	out[keys.AttrVersion] = &types.AttributeValueMemberN{Value: fmt.Sprint(ls[1].Version)}
	out[projection.AttrDoc] = &types.AttributeValueMemberS{Value: fmt.Sprintf(`{"book":%q,"on_shelf":false}`, ls[1].Book)}
	if _, err := s.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: out}); err != nil {
		t.Fatal(err)
	}
	parks := shelf.New(s.ddb, table, s.env[keys.EnvStateTable]).Store
	now := time.Now()
	if err := parks.Park(ctx, projection.Park{Tenant: "east-branch", ParkedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(12 * time.Hour),
		Change: projection.Change{Entity: loans.Entity, ID: ls[2].ID, Version: 9, Item: map[string]any{loans.AttrBook: ls[2].Book, loans.AttrStatus: loans.StatusReturned}}}); err != nil {
		t.Fatal(err)
	}

	s.repair()
	for _, l := range ls[:2] {
		if r, ok, err := shelf.Get(ctx, s.ddb, table, "east-branch", l.ID); err != nil || !ok || r != want(l) {
			t.Errorf("loan %s after dlq-repair: %+v (found %v, %v), want %+v", l.ID, r, ok, err, want(l))
		}
	}
	fn := s.fn[keys.FnDLQRepair]
	for _, sub := range []string{`"fault":"missing"`, `"fault":"divergent"`, "parked change outlived its threshold", "parked change about to expire unapplied",
		`"ProjParkAged":1`, `"ProjParkExpiring":1`, `"Fault":"divergent"`} {
		if len(s.grep(fn, sub)) == 0 {
			t.Errorf("dlq-repair's output has no line with %s", sub)
		}
	}
	if lines := s.grep(fn, "projection compared with its source"); len(lines) == 0 || !strings.Contains(lines[len(lines)-1], `"done":true`) {
		t.Errorf("no finished compare in dlq-repair's output: %q", lines)
	}
	if _, ok, err := parks.Parked(ctx, "east-branch", loans.Entity, ls[2].ID, 9); err != nil || !ok {
		t.Errorf("the open park was removed (%v, %v); it must stay until its gap closes", ok, err)
	}
}
