package backbone

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/infra/backbone/backbonetest"
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestAlarmDestinationRequired: a backbone that does not say where its
// alarms go does not synthesize; the error names the three props. A reason
// for none, with a destination too, or an address that is not one, fail as
// well, each naming the prop.
func TestAlarmDestinationRequired(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(st awscdk.Stack, p *Props)
		want string
	}{
		{"none", func(_ awscdk.Stack, p *Props) { p.AlarmEmail = "" },
			"the alarms reach no one: give Props.AlarmEmail (an address to subscribe), Props.AlarmTopic or Props.AlarmTopicArn (an existing SNS topic) or Props.NoAlarmDestination (why the alarms may reach no one"},
		{"blank reason", func(_ awscdk.Stack, p *Props) { p.AlarmEmail, p.NoAlarmDestination = "", "  " },
			"the alarms reach no one: give Props.AlarmEmail"},
		{"reason and email", func(_ awscdk.Stack, p *Props) { p.NoAlarmDestination = "sandbox" },
			`Props.NoAlarmDestination ("sandbox") says the alarms reach no one, but Props.AlarmEmail or Props.AlarmTopic names a destination: give one or the other`},
		{"two addresses", func(_ awscdk.Stack, p *Props) { p.AlarmEmail = "a@example.com,b@example.com" },
			`Props.AlarmEmail "a@example.com,b@example.com" is not one email address`},
		{"no domain", func(_ awscdk.Stack, p *Props) { p.AlarmEmail = "ops@" },
			`Props.AlarmEmail "ops@" is not one email address`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ls := synthLibrary(t, tt.edit)
			if len(ls.errors) != 1 || !strings.Contains(ls.errors[0], tt.want) {
				t.Errorf("synthesis errors %q, want one containing %q", ls.errors, tt.want)
			}
		})
	}
}

// TestNoAlarmDestinationRecorded: an explicit opt-out synthesizes, and the
// template says so where an operator looks: the alarm topic's metadata and
// the AlarmTopicArn output. Nothing is subscribed.
func TestNoAlarmDestinationRecorded(t *testing.T) {
	const reason = "sandbox account, torn down nightly"
	ls := synthLibrary(t, func(_ awscdk.Stack, p *Props) { p.AlarmEmail, p.NoAlarmDestination = "", "  "+reason+" " })
	if len(ls.errors) > 0 {
		t.Fatalf("synthesis errors: %v", ls.errors)
	}
	tmpl := backbonetest.Template(ls.doc)
	topic := tmpl.Resources("AWS::SNS::Topic")[LogicalAlarmTopic]
	if topic == nil {
		t.Fatalf("no topic %s", LogicalAlarmTopic)
	}
	md, _ := topic["Metadata"].(map[string]any)
	if md[keys.MetadataNoAlarmDestination] != reason {
		t.Errorf("topic metadata %v, want %s = %q", md, keys.MetadataNoAlarmDestination, reason)
	}
	out, _ := tmpl.Outputs()[keys.OutputAlarmTopic].(map[string]any)
	if d, _ := out["Description"].(string); !strings.HasSuffix(d, "No one is subscribed: "+reason) {
		t.Errorf("output %s description %q, want it to end with the reason", keys.OutputAlarmTopic, d)
	}
	if subs := tmpl.Resources("AWS::SNS::Subscription"); len(subs) != 0 {
		t.Errorf("subscriptions %v, want none", subs)
	}
}

// TestAlarmsFromContext: the apps' context values set the destination; a
// topic ARN is imported and every alarm notifies it.
func TestAlarmsFromContext(t *testing.T) {
	const arn = "arn:aws:sns:eu-west-1:111122223333:oncall"
	for _, tt := range []struct {
		ctx   map[string]any
		check func(t *testing.T, p Props)
	}{
		{map[string]any{keys.ContextAlarmEmail: " ops@example.com "}, func(t *testing.T, p Props) {
			if p.AlarmEmail != "ops@example.com" || p.AlarmTopicArn != "" || p.NoAlarmDestination != "" {
				t.Errorf("props %+v, want the address only", p)
			}
		}},
		{map[string]any{keys.ContextAlarmTopicArn: arn}, func(t *testing.T, p Props) {
			if p.AlarmTopicArn != arn || p.AlarmEmail != "" {
				t.Errorf("props %+v, want topic %s only", p, arn)
			}
		}},
		{map[string]any{keys.ContextNoAlarmDestination: "sandbox"}, func(t *testing.T, p Props) {
			if p.NoAlarmDestination != "sandbox" || p.AlarmEmail != "" {
				t.Errorf("props %+v, want the reason only", p)
			}
		}},
		{nil, func(t *testing.T, p Props) {
			if p.AlarmEmail != "" || p.AlarmTopicArn != "" || p.NoAlarmDestination != "" {
				t.Errorf("props %+v from no context, want none set", p)
			}
		}},
	} {
		a := awscdk.NewApp(&awscdk.AppProps{Context: &tt.ctx, Outdir: jsii.String(t.TempDir())})
		var p Props
		p.AlarmsFromContext(a)
		tt.check(t, p)
	}
}

// TestAlarmTopicArn: a topic named by ARN is imported; every alarm
// notifies it and the backbone creates none.
func TestAlarmTopicArn(t *testing.T) {
	const arn = "arn:aws:sns:eu-west-1:111122223333:oncall"
	ls := synthLibrary(t, func(_ awscdk.Stack, p *Props) { p.AlarmEmail, p.AlarmTopicArn = "", arn })
	if len(ls.errors) > 0 {
		t.Fatalf("synthesis errors: %v", ls.errors)
	}
	tmpl := backbonetest.Template(ls.doc)
	if topics := tmpl.Resources("AWS::SNS::Topic"); len(topics) != 0 {
		t.Errorf("topics %v, want none", topics)
	}
	for id, al := range tmpl.Resources("AWS::CloudWatch::Alarm") {
		if diff := cmp.Diff([]any{arn}, props(al)["AlarmActions"]); diff != "" {
			t.Errorf("%s AlarmActions (-want +got):\n%s", id, diff)
		}
	}
}

// TestNotaryStoppedAlarm: a disabled notary mapping invokes nothing (no
// finding, no lag, no error, and the log goes unwatched), so the alarm compares the log's writes (the heartbeat: an idle
// table alarms no one) with what the mapping polled, which its own metrics
// report.
func TestNotaryStoppedAlarm(t *testing.T) {
	s := synth(t)
	m := props(s.resources("AWS::Lambda::EventSourceMapping")[LogicalNotaryESM])
	if b, _ := json.Marshal(m["MetricsConfig"]); string(b) != `{"Metrics":["EventCount"]}` {
		t.Errorf("notary mapping MetricsConfig %s, want EventCount", b)
	}
	p, ok := s.alarmOnQuery("FILL(polled, 0) == 0")
	if !ok {
		t.Fatal("no alarm for a stopped notary mapping")
	}
	if !strings.Contains(p["AlarmDescription"].(string), "notary") {
		t.Errorf("stopped-mapping alarm %v does not name the notary", p["AlarmDescription"])
	}
	b, _ := json.Marshal(p["Metrics"])
	for _, want := range []string{
		`"MetricName":"ConsumedWriteCapacityUnits"`, `{"Name":"TableName","Value":{"Ref":"` + LogicalEventsTable + `"}}`,
		`"MetricName":"PolledEventCount"`, `"Namespace":"AWS/Lambda"`, `{"Name":"EventSourceMappingUUID","Value":{"Ref":"` + LogicalNotaryESM + `"}}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("stopped notary alarm metrics lack %s:\n%s", want, b)
		}
	}
	if p["EvaluationPeriods"] != 2.0 || p["DatapointsToAlarm"] != 2.0 || p["TreatMissingData"] != "notBreaching" {
		t.Errorf("alarm over %v/%v periods, missing data %v; want 2 of 2 (missing polls are FILLed as zero)", p["DatapointsToAlarm"], p["EvaluationPeriods"], p["TreatMissingData"])
	}
	if len(list(p["AlarmActions"])) != 1 {
		t.Errorf("alarm actions %v, want the alarm topic", p["AlarmActions"])
	}
}

// TestChangeFeedStoppedAlarm: a tracked table's change-feed mapping that
// stops invokes nothing, and no heartbeat crosses a team's table, so the
// alarm compares that table's writes with what its mapping polled.
func TestChangeFeedStoppedAlarm(t *testing.T) {
	s := synth(t)
	esm := LogicalChangeFeedESM + widgetEntity
	m := props(s.resources("AWS::Lambda::EventSourceMapping")[esm])
	if b, _ := json.Marshal(m["MetricsConfig"]); string(b) != `{"Metrics":["EventCount"]}` {
		t.Errorf("%s MetricsConfig %s, want EventCount", esm, b)
	}
	p, ok := s.alarmOnQuery("FILL(tpolled, 0) == 0")
	if !ok {
		t.Fatal("no alarm for a stopped change-feed mapping")
	}
	if d := p["AlarmDescription"].(string); !strings.Contains(d, widgetEntity) || !strings.Contains(d, "change-feed") {
		t.Errorf("stopped change-feed alarm %q names neither the entity nor the change feed", d)
	}
	b, _ := json.Marshal(p["Metrics"])
	for _, want := range []string{
		`"MetricName":"ConsumedWriteCapacityUnits"`, `{"Name":"TableName","Value":{"Ref":"` + s.id(s.stack.Widgets) + `"}}`,
		`"MetricName":"PolledEventCount"`, `{"Name":"EventSourceMappingUUID","Value":{"Ref":"` + esm + `"}}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("stopped change-feed alarm metrics lack %s:\n%s", want, b)
		}
	}
	if p["EvaluationPeriods"] != 2.0 || p["DatapointsToAlarm"] != 2.0 || p["TreatMissingData"] != "notBreaching" {
		t.Errorf("alarm over %v/%v periods, missing data %v; want 2 of 2", p["DatapointsToAlarm"], p["EvaluationPeriods"], p["TreatMissingData"])
	}
	if len(list(p["AlarmActions"])) != 1 {
		t.Errorf("alarm actions %v, want the alarm topic", p["AlarmActions"])
	}
}

// TestTamperWatchStateStoppedAlarm: the same watch of the watcher on the
// state table's stream.
func TestTamperWatchStateStoppedAlarm(t *testing.T) {
	s := synth(t)
	p, ok := s.alarmOnQuery("FILL(spolled, 0) == 0")
	if !ok {
		t.Fatal("no alarm for a stopped tamper-watch state mapping")
	}
	b, _ := json.Marshal(p["Metrics"])
	for _, want := range []string{
		`{"Name":"TableName","Value":{"Ref":"` + LogicalStateTable + `"}}`,
		`{"Name":"EventSourceMappingUUID","Value":{"Ref":"` + LogicalTamperStateESM + `"}}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("stopped state-mapping alarm metrics lack %s:\n%s", want, b)
		}
	}
}

// TestAuditTrail: Props.AuditTrail records the data events of the two
// tables and the checkpoint objects, with log file validation, into a bucket
// only this trail may write and no one may delete from. Off by default.
func TestAuditTrail(t *testing.T) {
	s := synth(t)
	trail := props(s.resources("AWS::CloudTrail::Trail")[LogicalAuditTrail])
	if trail == nil {
		t.Fatalf("no trail %s: %v", LogicalAuditTrail, s.resources("AWS::CloudTrail::Trail"))
	}
	if trail["IsLogging"] != true || trail["EnableLogFileValidation"] != true || !cmp.Equal(trail["S3BucketName"], ref(LogicalAuditTrailBucket)) {
		t.Errorf("trail %v: want logging, log file validation, bucket %s", trail, LogicalAuditTrailBucket)
	}
	if _, ok := trail["EventSelectors"]; ok {
		t.Errorf("trail has basic EventSelectors beside advanced ones: %v", trail["EventSelectors"])
	}
	sel, _ := json.Marshal(trail["AdvancedEventSelectors"])
	for _, want := range []string{
		`{"Equals":["Data"],"Field":"eventCategory"}`,
		`{"Equals":["AWS::DynamoDB::Table"],"Field":"resources.type"}`,
		`{"Equals":[{"Fn::GetAtt":["` + LogicalEventsTable + `","Arn"]}],"Field":"resources.ARN"}`,
		`{"Equals":[{"Fn::GetAtt":["` + LogicalStateTable + `","Arn"]}],"Field":"resources.ARN"}`,
		`{"Equals":["AWS::S3::Object"],"Field":"resources.type"}`,
		`"StartsWith":[{"Fn::Join":["",[{"Fn::GetAtt":["` + LogicalCheckpointBucket + `","Arn"]},"/"]]}]`,
	} {
		if !strings.Contains(string(sel), want) {
			t.Errorf("trail selectors lack %s:\n%s", want, sel)
		}
	}
	var policy map[string]any
	for _, bp := range s.resources("AWS::S3::BucketPolicy") {
		if cmp.Equal(props(bp)["Bucket"], ref(LogicalAuditTrailBucket)) {
			policy = props(bp)["PolicyDocument"].(map[string]any)
		}
	}
	pb, _ := json.Marshal(policy)
	for _, want := range []string{`"Sid":"CloudTrailWrite"`, `"aws:SourceArn"`, `"s3:x-amz-acl":"bucket-owner-full-control"`, `"Sid":"DenyTrailDeletes"`} {
		if !strings.Contains(string(pb), want) {
			t.Errorf("audit bucket policy lacks %s:\n%s", want, pb)
		}
	}

	ls := synthLibrary(t, nil)
	if trails := backbonetest.Template(ls.doc).Resources("AWS::CloudTrail::Trail"); len(trails) != 0 {
		t.Errorf("trails %v without Props.AuditTrail, want none", trails)
	}
}

// TestLogRetention: the watchers' log groups (tamper-watch, the notary)
// keep a year by default, the others a month; both are props.
func TestLogRetention(t *testing.T) {
	s := synth(t)
	groups := s.resources("AWS::Logs::LogGroup")
	tamper, notary := s.id(s.stack.Tamper.Function.Logs), s.id(s.stack.Notary.Function.Logs)
	for id, g := range groups {
		if strings.HasPrefix(id, "Bench") {
			continue // the team's function beside the backbone
		}
		want := 30.0
		if id == tamper || id == notary {
			want = 365
		}
		if got := props(g)["RetentionInDays"]; got != want {
			t.Errorf("log group %s keeps %v days, want %v", id, got, want)
		}
	}
	ls := synthLibrary(t, func(_ awscdk.Stack, p *Props) {
		p.LogRetention, p.IntegrityLogRetention = awslogs.RetentionDays_ONE_WEEK, awslogs.RetentionDays_TEN_YEARS
	})
	if len(ls.errors) > 0 {
		t.Fatalf("synthesis errors: %v", ls.errors)
	}
	tamper, notary = ls.id(ls.stack.Tamper.Function.Logs), ls.id(ls.stack.Notary.Function.Logs)
	for id, g := range backbonetest.Template(ls.doc).Resources("AWS::Logs::LogGroup") {
		want := 7.0
		if id == tamper || id == notary {
			want = 3653
		}
		if got := props(g)["RetentionInDays"]; got != want {
			t.Errorf("library log group %s keeps %v days, want %v", id, got, want)
		}
	}
}

// TestCustomerManagedKeys: with TableKey, QueueKey and LogKey, every table
// of the backbone, every queue and every log group is encrypted with its
// key; every role of the backbone and the emitter policy may use the keys,
// CloudWatch Logs may use the log key, and the synthesis (cdk-nag included)
// has no error.
func TestCustomerManagedKeys(t *testing.T) {
	var tableKey, queueKey, logKey awskms.Key
	ls := synthLibrary(t, func(st awscdk.Stack, p *Props) {
		mk := func(id string) awskms.Key {
			return awskms.NewKey(st, jsii.String(id), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
		}
		tableKey, queueKey, logKey = mk("TableKey"), mk("QueueKey"), mk("LogKey")
		p.TableKey, p.QueueKey, p.LogKey = tableKey, queueKey, logKey
	})
	if len(ls.errors) > 0 {
		t.Fatalf("synthesis errors: %v", ls.errors)
	}
	tmpl := backbonetest.Template(ls.doc)
	arn := func(k awskms.Key) any { return getAtt(ls.id(k), "Arn") }
	for _, id := range []string{LogicalEventsTable, LogicalStateTable, LogicalChangeFeedTable} {
		sse, _ := props(tmpl.Resources("AWS::DynamoDB::Table")[id])["SSESpecification"].(map[string]any)
		if !cmp.Equal(sse["KMSMasterKeyId"], arn(tableKey)) || sse["SSEType"] != "KMS" {
			t.Errorf("table %s SSESpecification %v, want the table key", id, sse)
		}
	}
	for id, q := range tmpl.Resources("AWS::SQS::Queue") {
		if k := props(q)["KmsMasterKeyId"]; !cmp.Equal(k, arn(queueKey)) {
			t.Errorf("queue %s KmsMasterKeyId %v, want the queue key", id, k)
		}
	}
	for id, g := range tmpl.Resources("AWS::Logs::LogGroup") {
		if k := props(g)["KmsKeyId"]; !cmp.Equal(k, arn(logKey)) {
			t.Errorf("log group %s KmsKeyId %v, want the log key", id, k)
		}
	}
	b := ls.stack
	gs := grants(ls.doc)
	for _, r := range []awsiam.IRole{b.Durable.PipeRole, b.Durable.StreamFilter.Role, b.Durable.DurableConsumer.Role, b.ChangeFeed.Changefeed.Role,
		b.Reconcile.Function.Role, b.Repair.Function.Role, b.Tamper.Function.Role, b.Notary.Function.Role} {
		got := access(gs, ls.id(r))
		for _, k := range []awskms.Key{tableKey, queueKey} {
			if !contains(got[ls.id(k)+".Arn"], "kms:Decrypt") || !contains(got[ls.id(k)+".Arn"], "kms:GenerateDataKey") {
				t.Errorf("role %s may not use key %s: %v", ls.id(r), ls.id(k), got)
			}
		}
	}
	emitter, _ := json.Marshal(tmpl.Resources("AWS::IAM::ManagedPolicy")[ls.id(b.Log.EmitterPolicy)])
	if !strings.Contains(string(emitter), `"`+ls.id(tableKey)+`","Arn"`) {
		t.Errorf("the emitter policy cannot use the table key: %s", emitter)
	}
	kp, _ := json.Marshal(props(tmpl.Resources("AWS::KMS::Key")[ls.id(logKey)])["KeyPolicy"])
	if !strings.Contains(string(kp), "CloudWatchLogsEncryptsTheBackbonesLogs") || !strings.Contains(string(kp), "kms:EncryptionContext:aws:logs:arn") {
		t.Errorf("the log key's policy does not let CloudWatch Logs use it: %s", kp)
	}
}

// TestModuleOwnerAlarms: a module that names its owner's topic gets alarms
// of its own on its DURABLE dead letters and its event types that matched
// no subscription, notifying that topic and the stack's; a module that
// names none gets none; an ARN that is not a topic's fails the synthesis.
func TestModuleOwnerAlarms(t *testing.T) {
	const owner = "arn:aws:sns:eu-west-1:111122223333:lending-oncall"
	owned := libraryApp
	owned.Modules = slices.Clone(libraryApp.Modules)
	owned.Modules[0].AlarmTopicArn = owner
	ls := synthLibrary(t, func(_ awscdk.Stack, p *Props) { p.App = owned })
	if len(ls.errors) > 0 {
		t.Fatalf("synthesis errors: %v", ls.errors)
	}
	tmpl := backbonetest.Template(ls.doc)
	queries := map[string]map[string]any{}
	for _, al := range tmpl.Resources("AWS::CloudWatch::Alarm") {
		for _, m := range list(props(al)["Metrics"]) {
			if e, _ := m.(map[string]any)["Expression"].(string); strings.Contains(e, "WHERE") {
				queries[e] = props(al)
			}
		}
	}
	for _, q := range []string{
		`SELECT SUM(DeadLettered) FROM SCHEMA("fourlanes", Subscription) WHERE Subscription = 'library.remind'`,
		`SELECT SUM(Unmatched) FROM SCHEMA("fourlanes", Lane, Type) WHERE Type = 'library.book-lent'`,
	} {
		p, ok := queries[q]
		if !ok {
			t.Errorf("no alarm on %s; owner alarms: %v", q, queries)
			continue
		}
		acts, _ := json.Marshal(p["AlarmActions"])
		if !strings.Contains(string(acts), owner) || !strings.Contains(string(acts), `"Ref":"`+LogicalAlarmTopic+`"`) {
			t.Errorf("alarm on %s notifies %s, want the owner's topic and the stack's", q, acts)
		}
	}
	if len(queries) != 2 {
		t.Errorf("%d owner alarms, want 2 (shelf names no owner, library has no LOCAL subscription): %v", len(queries), queries)
	}

	bad := libraryApp
	bad.Modules = slices.Clone(libraryApp.Modules)
	bad.Modules[1].AlarmTopicArn = "oncall@example.com"
	ls = synthLibrary(t, func(_ awscdk.Stack, p *Props) { p.App = bad })
	if len(ls.errors) != 1 || !strings.Contains(ls.errors[0], `module shelf of application library: AlarmTopicArn "oncall@example.com" is not an SNS topic ARN`) {
		t.Errorf("synthesis errors %q, want one naming module shelf's AlarmTopicArn", ls.errors)
	}
}

// deskModule has a LOCAL subscription whose own Owner is not its module's.
var deskModule = catalog.Module[librarian]{
	Name: "desk",
	Subscribes: []catalog.Subscription[librarian]{
		{Name: "desk.notify", Types: "library.book-lent", Lane: catalog.Local, Reads: []int{1}, Handler: librarian.handle, Owner: "team-desk"},
	},
}

// ownedLibrary is the library app with owners declared in its catalog:
// the library module by team-lending, the desk's LOCAL subscription by
// team-desk.
func ownedLibrary() app.Application {
	lib := libraryModule
	lib.Owner = "team-lending"
	a := libraryApp
	a.Modules = slices.Clone(libraryApp.Modules)
	a.Modules[0].Spec = lib.Spec()
	a.Modules = append(a.Modules, app.Module{Spec: deskModule.Spec()})
	return a
}

// TestCatalogOwnerAlarms: each owner the catalog names gets alarms of its
// own, notifying its destination from Props.Owners beside the stack's
// topic: team-lending (an existing topic) on its module's DURABLE dead
// letters and unmatched event types, team-desk (an address, subscribed to
// a topic the backbone creates) on its LOCAL handler's failures. An owner
// without a destination, a destination without an owner, and a destination
// given twice fail the synthesis, naming the owner.
func TestCatalogOwnerAlarms(t *testing.T) {
	const lending = "arn:aws:sns:eu-west-1:111122223333:lending-oncall"
	owners := map[string]OwnerDestination{"team-lending": {TopicArn: lending}, "team-desk": {Email: "desk@example.com"}}
	ls := synthLibrary(t, func(_ awscdk.Stack, p *Props) { p.App, p.Owners = ownedLibrary(), owners })
	if len(ls.errors) > 0 {
		t.Fatalf("synthesis errors: %v", ls.errors)
	}
	lintDoc(t, ls.doc)
	tmpl := backbonetest.Template(ls.doc)
	var deskTopic string
	for id, sub := range tmpl.Resources("AWS::SNS::Subscription") {
		if p := props(sub); p["Endpoint"] == "desk@example.com" && p["Protocol"] == "email" {
			deskTopic, _ = p["TopicArn"].(map[string]any)["Ref"].(string)
		} else if p["Endpoint"] != testAlarmEmail {
			t.Errorf("subscription %s: %v, want only the stack's and team-desk's addresses", id, p)
		}
	}
	if deskTopic == "" || deskTopic == LogicalAlarmTopic {
		t.Fatalf("no topic of its own subscribes team-desk's address: %v", tmpl.Resources("AWS::SNS::Subscription"))
	}
	if p := props(tmpl.Resources("AWS::SNS::Topic")[deskTopic]); p == nil {
		t.Fatalf("team-desk's topic %s is not in the template", deskTopic)
	}
	queries := map[string]map[string]any{}
	for _, al := range tmpl.Resources("AWS::CloudWatch::Alarm") {
		for _, m := range list(props(al)["Metrics"]) {
			if e, _ := m.(map[string]any)["Expression"].(string); strings.Contains(e, "WHERE") {
				queries[e] = props(al)
			}
		}
	}
	for q, dest := range map[string]string{
		`SELECT SUM(DeadLettered) FROM SCHEMA("fourlanes", Subscription) WHERE Subscription = 'library.remind'`:      `"` + lending + `"`,
		`SELECT SUM(Unmatched) FROM SCHEMA("fourlanes", Lane, Type) WHERE Type = 'library.book-lent'`:                `"` + lending + `"`,
		`SELECT SUM(LocalHandlerFailures) FROM SCHEMA("fourlanes", Subscription) WHERE Subscription = 'desk.notify'`: `{"Ref":"` + deskTopic + `"}`,
	} {
		p, ok := queries[q]
		if !ok {
			t.Errorf("no alarm on %s; owner alarms: %v", q, queries)
			continue
		}
		for _, k := range []string{"AlarmActions", "OKActions"} {
			acts, _ := json.Marshal(p[k])
			if !strings.Contains(string(acts), dest) || !strings.Contains(string(acts), `{"Ref":"`+LogicalAlarmTopic+`"}`) || len(list(p[k])) != 2 {
				t.Errorf("alarm on %s: %s %s, want the owner's destination %s and the stack's topic", q, k, acts, dest)
			}
		}
		if d, _ := p["AlarmDescription"].(string); !strings.Contains(d, "owner team-") {
			t.Errorf("alarm on %s: description %q does not name the owner", q, d)
		}
	}
	if len(queries) != 3 {
		t.Errorf("%d owner alarms, want 3: %v", len(queries), queries)
	}

	for _, tt := range []struct {
		name   string
		owners map[string]OwnerDestination
		want   string
	}{
		{"owner without destination", map[string]OwnerDestination{"team-lending": {TopicArn: lending}},
			`owner "team-desk" (subscription desk.notify) has no alarm destination: add it to Props.Owners`},
		{"destination without owner", map[string]OwnerDestination{"team-lending": {TopicArn: lending}, "team-desk": {Email: "desk@example.com"}, "team-gone": {Email: "x@example.com"}},
			`Props.Owners["team-gone"]: no module or subscription of application library names this owner`},
		{"two destinations", map[string]OwnerDestination{"team-lending": {TopicArn: lending, Email: "l@example.com"}, "team-desk": {Email: "desk@example.com"}},
			`Props.Owners["team-lending"]: give exactly one of Email, Topic and TopicArn (2 given)`},
		{"bad address", map[string]OwnerDestination{"team-lending": {TopicArn: lending}, "team-desk": {Email: "desk@"}},
			`Props.Owners["team-desk"]: Email "desk@" is not one email address`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ls := synthLibrary(t, func(_ awscdk.Stack, p *Props) { p.App, p.Owners = ownedLibrary(), tt.owners })
			if len(ls.errors) != 1 || !strings.Contains(ls.errors[0], tt.want) {
				t.Errorf("synthesis errors %q, want one containing %q", ls.errors, tt.want)
			}
		})
	}

	// Opted out (a sandbox: Props.NoAlarmDestination): an owner without a
	// destination still gets alarms of its own, on a topic of its own that
	// no one is subscribed to and that records why, as the stack's does.
	t.Run("owner without destination, alarms opted out", func(t *testing.T) {
		ls := synthLibrary(t, func(_ awscdk.Stack, p *Props) {
			p.App, p.Owners = ownedLibrary(), map[string]OwnerDestination{"team-lending": {TopicArn: lending}}
			p.AlarmEmail, p.NoAlarmDestination = "", "sandbox account"
		})
		if len(ls.errors) > 0 {
			t.Fatalf("synthesis errors: %v", ls.errors)
		}
		tmpl := backbonetest.Template(ls.doc)
		if subs := tmpl.Resources("AWS::SNS::Subscription"); len(subs) != 0 {
			t.Errorf("subscriptions %v, want none (no destination anywhere)", subs)
		}
		var deskTopic string
		for _, al := range tmpl.Resources("AWS::CloudWatch::Alarm") {
			if d, _ := props(al)["AlarmDescription"].(string); !strings.Contains(d, "owner team-desk") {
				continue
			}
			for _, a := range list(props(al)["AlarmActions"]) {
				if ref, _ := a.(map[string]any)["Ref"].(string); ref != "" && ref != LogicalAlarmTopic {
					deskTopic = ref
				}
			}
		}
		topic := tmpl.Resources("AWS::SNS::Topic")[deskTopic]
		if deskTopic == "" || topic == nil {
			t.Fatalf("team-desk's alarms notify no topic of its own (%q)", deskTopic)
		}
		if md, _ := topic["Metadata"].(map[string]any); md[keys.MetadataNoAlarmDestination] != "sandbox account" {
			t.Errorf("team-desk's topic metadata %v, want %s = the opt-out's reason", topic["Metadata"], keys.MetadataNoAlarmDestination)
		}
	})
}
