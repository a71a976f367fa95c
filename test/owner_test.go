package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/infra/backbone"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin"
)

// TestOwnerAlarmReachesOwnerAndStack: the orders example's email
// subscription names its owner (team-notifications), whose destination the
// stack maps to an address subscribed to a topic of the owner's. A dead
// letter of that subscription, written by the durable consumer as on AWS,
// puts the owner's alarm (as synthesized: its Metrics Insights query on
// DeadLettered by Subscription) in ALARM, and the twin, evaluating the
// template's alarms over the functions' EMF metrics, delivers the
// notification to the owner's topic and to the stack's. A failure that is
// not the owner's (a notary finding, on another tenant's log) reaches the
// stack's topic only, as do the alarms on what this test never runs (the
// heartbeat, reconcile's rounds: missing data breaches them).
func TestOwnerAlarmReachesOwnerAndStack(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, nil)
	ctx := context.Background()
	tmpl := s.tw.Template()

	// The owner's alarm, as synthesized.
	var ownerAlarm string
	for _, r := range tmpl.OfType("AWS::CloudWatch::Alarm") {
		ms, _ := r.Prop("Metrics")
		if strings.Contains(fmt.Sprint(ms), fmt.Sprintf("SUM(%s)", keys.MetricDeadLettered)) && strings.Contains(fmt.Sprint(ms), "Subscription = '"+emailSub+"'") {
			ownerAlarm = r.LogicalID
		}
	}
	if ownerAlarm == "" {
		t.Fatalf("the template has no alarm on %s of %s", keys.MetricDeadLettered, emailSub)
	}
	// The owner's topic: the one its alarm notifies beside the stack's.
	// The twin synthesizes with no alarm destination (noAlarmDestination)
	// and no address for the owner, so its topic, like the stack's, has no
	// subscriber and records why.
	var ownerTopicID string
	for _, r := range tmpl.OfType("AWS::CloudWatch::Alarm") {
		if r.LogicalID != ownerAlarm {
			continue
		}
		actions, _ := r.Prop("AlarmActions")
		for _, id := range tmpl.References(actions) {
			if id != backbone.LogicalAlarmTopic {
				ownerTopicID = id
			}
		}
	}
	if ownerTopicID == "" {
		t.Fatalf("%s notifies no topic of %s's own", ownerAlarm, notifications.Owner)
	}
	if r := tmpl.Resources[ownerTopicID]; r == nil || !strings.Contains(fmt.Sprint(r.Metadata), keys.MetadataNoAlarmDestination) {
		t.Errorf("%s's topic %s does not record why no one is subscribed (%s)", notifications.Owner, ownerTopicID, keys.MetadataNoAlarmDestination)
	}
	ownerTopic, err := s.tw.Ref(ownerTopicID)
	if err != nil {
		t.Fatal(err)
	}
	stackTopic, err := s.tw.Ref(backbone.LogicalAlarmTopic)
	if err != nil {
		t.Fatal(err)
	}
	states := func() map[string]twin.AlarmState {
		t.Helper()
		sts, err := s.tw.EvaluateAlarms(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]twin.AlarmState{}
		for _, st := range sts {
			out[st.LogicalID] = st
		}
		return out
	}
	if st := states()[ownerAlarm]; st.State != twin.AlarmOK {
		t.Fatalf("the owner's alarm before any failure: %+v, want OK", st)
	}
	alarmed := func(topic, alarm string) bool {
		for _, n := range s.tw.Notifications(topic) {
			if n.LogicalID == alarm && n.NewState == twin.AlarmAlarm {
				return true
			}
		}
		return false
	}

	// Another failure first: a notary finding on globex's log (an extra
	// attribute on its head row) alarms the stack's topic, not the owner's.
	var notaryAlarm string
	for _, r := range tmpl.OfType("AWS::CloudWatch::Alarm") {
		name, _ := r.Prop("MetricName")
		ms, _ := r.Prop("Metrics")
		if b, _ := json.Marshal(ms); name == keys.MetricNotaryFinding || strings.Contains(string(b), "("+keys.MetricNotaryFinding+")") {
			notaryAlarm = r.LogicalID
		}
	}
	if notaryAlarm == "" {
		t.Fatalf("the template has no alarm on %s", keys.MetricNotaryFinding)
	}
	globex := pastOrders(t, s, "globex", 1)
	s.waitDelivered(t, globex)
	oddHead(t, s, "globex")
	var others []string
	eventually(t, 60*time.Second, "the stack's alarm on the notary's finding", func() (bool, string) {
		others = nil
		for id, st := range states() {
			if st.State == twin.AlarmAlarm {
				others = append(others, id)
			}
		}
		return slices.Contains(others, notaryAlarm), fmt.Sprintf("alarms in ALARM: %v; notary findings: %v", others, s.grep(s.fn[keys.FnNotary], "notary finding"))
	})
	var unsupported []string
	for id, st := range states() {
		if st.Unsupported != "" {
			unsupported = append(unsupported, id+": "+st.Unsupported)
		}
	}
	t.Logf("in ALARM after the notary's finding: %v; alarms the twin does not evaluate: %d %v", others, len(unsupported), unsupported)
	for _, id := range others {
		if !alarmed(stackTopic, id) {
			t.Errorf("alarm %s is in ALARM, but the stack's topic got no notification of it", id)
		}
		if alarmed(ownerTopic, id) {
			t.Errorf("alarm %s, not %s's, notified its topic", id, notifications.Owner)
		}
	}
	if st := states()[ownerAlarm]; st.State != twin.AlarmOK {
		t.Errorf("the owner's alarm after a failure that is not its own: %+v, want OK", st)
	}

	// The owner's failure: an event its subscription cannot decode.
	e, err := s.app.EmitUnchecked(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.app.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the event dead-lettered", func() (bool, string) {
		c, ok := s.claim(e.ID, emailSub)
		return ok && c.Status == delivery.StatusDead, fmt.Sprintf("claim %+v (found %v)", c, ok)
	})
	eventually(t, 30*time.Second, "the owner's alarm in ALARM", func() (bool, string) {
		st := states()[ownerAlarm]
		return st.State == twin.AlarmAlarm, fmt.Sprintf("%+v", st)
	})
	for what, topic := range map[string]string{"the owner's": ownerTopic, "the stack's": stackTopic} {
		if !alarmed(topic, ownerAlarm) {
			t.Errorf("%s topic %s got no ALARM notification of %s: %+v", what, topic, ownerAlarm, s.tw.Notifications(topic))
		}
	}
	t.Logf("owner topic: %+v", s.tw.Notifications(ownerTopic))
}

// oddHead puts tenant's head row back with an attribute an append never
// writes (a head_shape finding of the notary).
func oddHead(t *testing.T, s *stack, tenant string) {
	t.Helper()
	table := aws.String(s.env[keys.EnvEventsTable])
	key := map[string]types.AttributeValue{keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
		keys.AttrSeq: &types.AttributeValueMemberN{Value: strconv.Itoa(keys.HeadSeq)}}
	out, err := s.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("head of %s: %v", tenant, err)
	}
	out.Item["note"] = &types.AttributeValueMemberS{Value: "odd"}
	if _, err := s.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: table, Item: out.Item}); err != nil {
		t.Fatal(err)
	}
}
