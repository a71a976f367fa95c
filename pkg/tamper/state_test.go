package tamper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tamper"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// fixtureStateTable is the table the state-*.json fixtures' eventSourceARN
// names.
const fixtureStateTable = "Fourlanes-StateTable-9Z8Y7X6W5V4U"

// stateTable creates a state table in our DynamoDB holding the claim item of
// the fixtures' event, its send-receipt entry in status; it returns the
// table's name.
func stateTable(t *testing.T, db *dynamodb.Client, status string) string {
	t.Helper()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	td := localaws.CreateTable(t, db, &dynamodb.CreateTableInput{
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(keys.AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(keys.AttrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(keys.AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(keys.AttrSK), KeyType: types.KeyTypeRange},
		},
	})
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: td.TableName, Item: map[string]types.AttributeValue{
		keys.AttrPK: s(keys.StateEventClaimPrefix + "0190c5a8-7f10-7a2b-8c3d-4e5f60718293"), keys.AttrSK: s(keys.StateEventClaimSK),
		keys.AttrTenant: s("acme"),
		keys.AttrSubClaimPrefix + "send-receipt": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			keys.ClaimFieldStatus: s(status)}},
	}}); err != nil {
		t.Fatal(err)
	}
	return aws.ToString(td.TableName)
}

// stateRecord is a state-*.json fixture as the stream of table delivers it.
func stateRecord(t *testing.T, name, table string) json.RawMessage {
	t.Helper()
	return json.RawMessage(strings.ReplaceAll(string(fixture(t, name)), fixtureStateTable, table))
}

// TestInspectStateRemoves: deleting a claim or a watermark is a finding
// unless TTL did it; deleting a dead letter is one unless its claim entry
// says completed (a resolution), checked in the state table itself.
func TestInspectStateRemoves(t *testing.T) {
	db := localaws.DynamoDB(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name, file, claim string
		want              tamper.Change // "" for no finding
		what              string
	}{
		{"dead letter deleted while dead", "state-dead-remove.json", keys.ClaimDead, tamper.DeadLetterRemoved, "its claim entry is dead, not completed: the event was not delivered"},
		{"dead letter deleted while pending", "state-dead-remove.json", keys.ClaimPending, tamper.DeadLetterRemoved, "its claim entry is pending"},
		{"dead letter resolved", "state-dead-remove.json", keys.ClaimCompleted, "", ""},
		{"claim deleted", "state-claims-remove.json", keys.ClaimCompleted, tamper.ClaimRemoved, "claim item of event 0190c5a8-7f10-7a2b-8c3d-4e5f60718293 deleted before its TTL"},
		{"claim expired", "state-claims-remove-ttl.json", keys.ClaimCompleted, "", ""},
		{"watermark deleted", "state-watermark-remove.json", keys.ClaimCompleted, tamper.WatermarkRemoved, "delivery watermark of subscription send-receipt deleted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			table := stateTable(t, db, tt.claim)
			f, found := tamper.InspectState(ctx, stateRecord(t, tt.file, table), db, table)
			if tt.want == "" {
				if found {
					t.Errorf("finding %+v, want none", f)
				}
				return
			}
			if !found || f.Change != tt.want || f.Tenant != "acme" || !strings.Contains(f.What, tt.what) {
				t.Errorf("finding %+v (found %v), want %s of tenant acme saying %q", f, found, tt.want, tt.what)
			}
		})
	}
	t.Run("claim item gone", func(t *testing.T) {
		table := stateTable(t, db, keys.ClaimCompleted)
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
			keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateEventClaimPrefix + "0190c5a8-7f10-7a2b-8c3d-4e5f60718293"},
			keys.AttrSK: &types.AttributeValueMemberS{Value: keys.StateEventClaimSK}}}); err != nil {
			t.Fatal(err)
		}
		f, found := tamper.InspectState(ctx, stateRecord(t, "state-dead-remove.json", table), db, table)
		if !found || f.Change != tamper.DeadLetterRemoved || !strings.Contains(f.What, "no entry for the subscription") {
			t.Errorf("finding %+v (found %v), want %s: no claim to prove a resolution", f, found, tamper.DeadLetterRemoved)
		}
	})
	t.Run("claim unreadable", func(t *testing.T) {
		f, found := tamper.InspectState(ctx, stateRecord(t, "state-dead-remove.json", "no-such-table"), db, "no-such-table")
		if !found || f.Change != tamper.DeadLetterRemoved || !strings.Contains(f.What, "could not be read") {
			t.Errorf("finding %+v (found %v), want %s: an unverifiable delete is loud", f, found, tamper.DeadLetterRemoved)
		}
	})
}

// TestHandleRoutesStateRecords: one batch from both streams; the handler
// inspects each record by its source table, and reports a deleted dead
// letter with an ERROR line and a TamperDetected metric.
func TestHandleRoutesStateRecords(t *testing.T) {
	db := localaws.DynamoDB(t)
	table := stateTable(t, db, keys.ClaimDead)
	var logs, metrics bytes.Buffer
	h := &tamper.Handler{Logger: obs.NewLogger(&logs, "info"), Metrics: obs.NewMetrics(&metrics), StateTable: table, State: db}
	ev := tamper.Event{Records: []json.RawMessage{
		fixture(t, "event-modify.json"), stateRecord(t, "state-dead-remove.json", table), stateRecord(t, "state-claims-remove-ttl.json", table),
	}}
	if err := h.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, l := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		changes = append(changes, m[obs.KeyChange].(string))
		if m["level"] != "ERROR" || m[obs.KeyTenant] != "acme" {
			t.Errorf("line %v, want ERROR for tenant acme", m)
		}
	}
	if want := []string{string(tamper.EventModified), string(tamper.DeadLetterRemoved)}; strings.Join(changes, ",") != strings.Join(want, ",") {
		t.Errorf("findings %v, want %v", changes, want)
	}
	if !strings.Contains(metrics.String(), `"Change":"`+string(tamper.DeadLetterRemoved)+`"`) {
		t.Errorf("no TamperDetected metric with Change %s:\n%s", tamper.DeadLetterRemoved, metrics.String())
	}
}
