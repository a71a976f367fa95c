package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/restore"
)

// TestRestoreState: restore-state refuses without -from or with -from
// naming the live table (exit 2); without -yes it prints what it would copy
// and writes nothing; with -yes it copies the watermark the live table
// lacks and merges the subscription entry a live claim item lacks, and
// says so, in a table and in -json.
func TestRestoreState(t *testing.T) {
	ctx := context.Background()
	db := localaws.DynamoDB(t)
	localAWSEnv(t, aws.ToString(db.Options().BaseEndpoint))
	t.Setenv(keys.EnvStateTable, "")
	live := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "live"))).TableName)
	restored := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "restored"))).TableName)
	wm := map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateWatermarkPrefix + "acme"}, keys.AttrSK: &types.AttributeValueMemberS{Value: "s.email"},
		keys.AttrSeq: &types.AttributeValueMemberN{Value: "3"},
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(restored), Item: wm}); err != nil {
		t.Fatal(err)
	}
	claim := func(subs ...string) map[string]types.AttributeValue {
		it := map[string]types.AttributeValue{keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateEventClaimPrefix + "e1"},
			keys.AttrSK: &types.AttributeValueMemberS{Value: keys.StateEventClaimSK}}
		for _, sub := range subs {
			it[keys.AttrSubClaimPrefix+sub] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				keys.ClaimFieldStatus: &types.AttributeValueMemberS{Value: keys.ClaimCompleted}}}
		}
		return it
	}
	for table, it := range map[string]map[string]types.AttributeValue{restored: claim("s.email", "s.search"), live: claim("s.search")} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	liveHas := func() bool {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(live), Key: map[string]types.AttributeValue{keys.AttrPK: wm[keys.AttrPK], keys.AttrSK: wm[keys.AttrSK]}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item != nil
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"restore-state", "-state-table", live}, "pass -from"},
		{[]string{"restore-state", "-from", restored}, "pass -state-table"},
		{[]string{"restore-state", "-from", live, "-state-table", live}, "names the live state table"},
	} {
		if code, _, stderr := runCLI(t, tc.args...); code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("fourlanes %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, ExitUsage, tc.want)
		}
	}

	code, stdout, stderr := runCLI(t, "restore-state", "-from", restored, "-state-table", live)
	if code != ExitOK || !strings.Contains(stdout, "would copy 1 rows") || !strings.Contains(stdout, "would merge missing subscription entries into 1 live claim items") ||
		!strings.Contains(stderr, "nothing written") {
		t.Fatalf("dry run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if liveHas() {
		t.Fatal("the dry run wrote the watermark")
	}

	code, stdout, stderr = runCLI(t, "restore-state", "-from", restored, "-state-table", live, "-yes", "-json")
	var r restore.Report
	if err := json.Unmarshal([]byte(stdout), &r); code != ExitOK || err != nil {
		t.Fatalf("-yes -json: exit %d, %v\nstdout: %s\nstderr: %s", code, err, stdout, stderr)
	}
	if !r.Applied || r.Copied != 1 || r.Kinds[restore.Watermarks].Copied != 1 || r.Merged != 1 || r.Kinds[restore.Claims].Entries != 1 {
		t.Errorf("report %+v (claims %+v), want one watermark copied and one claim entry merged", r, r.Kinds[restore.Claims])
	}
	if !liveHas() {
		t.Error("-yes did not copy the watermark")
	}

	code, stdout, _ = runCLI(t, "restore-state", "-from", restored, "-state-table", live, "-yes")
	if code != ExitOK || !strings.Contains(stdout, "copied 0 rows") || !strings.Contains(stdout, "into 0 live claim items") {
		t.Errorf("second run: exit %d, stdout %s; want 0 rows copied", code, stdout)
	}
	if code, _, stderr := runCLI(t, "restore-state", "-from", localaws.UniqueName(t, "missing"), "-state-table", live, "-yes"); code != ExitError || !strings.Contains(stderr, "missing") {
		t.Errorf("a missing restored table: exit %d, stderr %q; want exit 1 naming it", code, stderr)
	}
}
