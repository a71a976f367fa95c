package backbone

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// ownerQuery is a Metrics Insights query over the series of an EMF metric
// counted with dimension dim, for the given values of it.
func ownerQuery(metric, dim string, values []string, other ...string) string {
	var or []string
	for _, v := range values {
		or = append(or, fmt.Sprintf("%s = '%s'", dim, v))
	}
	schema := append([]string{fmt.Sprintf("%q", keys.MetricNamespace)}, other...)
	schema = append(schema, dim)
	return fmt.Sprintf("SELECT SUM(%s) FROM SCHEMA(%s) WHERE %s", metric, strings.Join(schema, ", "), strings.Join(or, " OR "))
}

// OwnerDestination is where one owner's alarms go (Props.Owners): give
// exactly one of Email, Topic and TopicArn, as for the stack's own alarms.
type OwnerDestination struct {
	// Email is an address the backbone subscribes (after it confirms) to a
	// topic it creates for the owner.
	Email string
	// Topic or TopicArn is the owner's existing topic (its on-call's).
	Topic    awssns.ITopic
	TopicArn string
}

// owned is what one owner, or a module by its AlarmTopicArn, is paged for.
type owned struct {
	id, who               string // the alarms' construct id prefix; "module X" or "owner Y"
	topic                 awssns.ITopic
	durable, local, types []string
	users                 []string // the declarations that name it, for errors
}

// ownerUses lists, per owner name a module or subscription declares
// (catalog Owner), what it is paged for: the DURABLE and LOCAL
// subscriptions it owns, and the event types of the modules it owns.
func ownerUses(a app.Application) map[string]*owned {
	uses := map[string]*owned{}
	get := func(name string) *owned {
		if uses[name] == nil {
			uses[name] = &owned{id: "Team" + alnum(name), who: "owner " + name}
		}
		return uses[name]
	}
	for _, m := range a.Modules {
		if o := m.Spec.Owner; o != "" {
			u := get(o)
			u.users = append(u.users, "module "+m.Spec.Name)
			for _, e := range m.Spec.Emits {
				u.types = append(u.types, e.Name)
			}
		}
		for _, s := range m.Spec.Subscribes {
			if s.Owner == "" {
				continue
			}
			u := get(s.Owner)
			if s.Owner != m.Spec.Owner {
				u.users = append(u.users, "subscription "+s.Name)
			}
			switch s.Lane {
			case catalog.Durable:
				u.durable = append(u.durable, s.Name)
			case catalog.Local:
				u.local = append(u.local, s.Name)
			}
		}
	}
	return uses
}

// ownerErrors checks each module's AlarmTopicArn, and that every owner the
// catalog names has a destination in owners, and every destination an
// owner.
func ownerErrors(a app.Application, owners map[string]OwnerDestination, noDestination string) []error {
	var errs []error
	for _, m := range a.Modules {
		arn := m.AlarmTopicArn
		if arn == "" {
			continue
		}
		if !isTopicArn(arn) {
			errs = append(errs, fmt.Errorf("module %s of application %s: AlarmTopicArn %q is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", m.Spec.Name, a.Name, arn))
		}
	}
	for _, m := range a.Modules {
		for _, name := range ownedNames(m) {
			if strings.ContainsAny(name, "'\\") {
				errs = append(errs, fmt.Errorf("module %s: %q cannot be named in an alarm's query (a quote or backslash)", m.Spec.Name, name))
			}
		}
	}
	uses := ownerUses(a)
	for _, name := range slices.Sorted(maps.Keys(uses)) {
		if _, ok := owners[name]; !ok && noDestination == "" {
			errs = append(errs, fmt.Errorf("owner %q (%s) has no alarm destination: add it to Props.Owners with an Email, Topic or TopicArn (or set Props.NoAlarmDestination, the reason no alarm reaches anyone)",
				name, strings.Join(uses[name].users, ", ")))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(owners)) {
		d := owners[name]
		if _, ok := uses[name]; !ok {
			errs = append(errs, fmt.Errorf("Props.Owners[%q]: no module or subscription of application %s names this owner (catalog Owner); remove it or fix the name", name, a.Name))
		}
		n := 0
		for _, set := range []bool{d.Email != "", d.Topic != nil, d.TopicArn != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Errorf("Props.Owners[%q]: give exactly one of Email, Topic and TopicArn (%d given)", name, n))
		}
		if d.TopicArn != "" && !isTopicArn(d.TopicArn) {
			errs = append(errs, fmt.Errorf("Props.Owners[%q]: TopicArn %q is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", name, d.TopicArn))
		}
		if e := d.Email; e != "" && !oneEmail(e) {
			errs = append(errs, fmt.Errorf("Props.Owners[%q]: Email %q is not one email address", name, e))
		}
	}
	return errs
}

// oneEmail reports whether e looks like one email address.
func oneEmail(e string) bool {
	at := strings.IndexByte(e, '@')
	return at > 0 && at < len(e)-1 && !strings.ContainsAny(e, " \t\n,;")
}

func ownedNames(m app.Module) []string {
	var out []string
	for _, s := range m.Spec.Subscribes {
		out = append(out, s.Name)
	}
	for _, e := range m.Spec.Emits {
		out = append(out, e.Name)
	}
	return out
}

// ownerAlarms gives every module that names an AlarmTopicArn, and every
// owner the catalog names (Props.Owners), alarms of its own, notifying its
// topic and the stack's (stack, ALARM and OK): its DURABLE subscriptions'
// dead letters (EMF DeadLettered by Subscription), its LOCAL handlers'
// failures (LocalHandlerFailures by Subscription) and the event types of
// its modules that matched no subscription (Unmatched by Lane and Type).
func (a *Alarms) ownerAlarms(application app.Application, owners map[string]OwnerDestination, noDestination string, stack awssns.ITopic) {
	var groups []*owned
	for _, m := range application.Modules {
		if !isTopicArn(m.AlarmTopicArn) {
			continue // none, or refused by ownerErrors
		}
		g := &owned{id: "Owner" + alnum(m.Spec.Name), who: "module " + m.Spec.Name}
		g.topic = awssns.Topic_FromTopicArn(a.Construct, jsii.String(g.id+"Topic"), jsii.String(m.AlarmTopicArn))
		for _, s := range m.Spec.Subscribes {
			switch s.Lane {
			case catalog.Durable:
				g.durable = append(g.durable, s.Name)
			case catalog.Local:
				g.local = append(g.local, s.Name)
			}
		}
		for _, e := range m.Spec.Emits {
			g.types = append(g.types, e.Name)
		}
		groups = append(groups, g)
	}
	uses := ownerUses(application)
	for _, name := range slices.Sorted(maps.Keys(uses)) {
		d, ok := owners[name]
		if !ok && noDestination == "" {
			continue // refused by ownerErrors
		}
		g := uses[name]
		switch {
		case !ok:
			// No one to page (Props.NoAlarmDestination): a topic of the
			// owner's all the same, so its alarms stay apart from the
			// stack's, recording why no one is subscribed.
			t := awssns.NewTopic(a.Construct, jsii.String(g.id+"Topic"), &awssns.TopicProps{
				DisplayName: jsii.String("fourlanes alarms of " + name),
				EnforceSSL:  jsii.Bool(true),
			})
			t.Node().DefaultChild().(awscdk.CfnResource).AddMetadata(jsii.String(keys.MetadataNoAlarmDestination), jsii.String(noDestination))
			g.topic = t
		case d.Topic != nil:
			g.topic = d.Topic
		case isTopicArn(d.TopicArn):
			g.topic = awssns.Topic_FromTopicArn(a.Construct, jsii.String(g.id+"Topic"), jsii.String(d.TopicArn))
		case d.Email != "":
			// As the stack's own topic: TLS only, no KMS key (alarms
			// cannot publish to a topic under aws/sns).
			t := awssns.NewTopic(a.Construct, jsii.String(g.id+"Topic"), &awssns.TopicProps{
				DisplayName: jsii.String("fourlanes alarms of " + name),
				EnforceSSL:  jsii.Bool(true),
			})
			t.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(d.Email), nil))
			g.topic = t
		default:
			continue // refused by ownerErrors
		}
		groups = append(groups, g)
	}
	for _, g := range groups {
		add := func(name, description, query string) {
			al := awscloudwatch.NewAlarm(a.Construct, jsii.String(g.id+name), &awscloudwatch.AlarmProps{
				AlarmDescription: jsii.String(description),
				Metric: awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
					Expression: jsii.String(query), Label: jsii.String(name), Period: minutes(5),
					UsingMetrics: &map[string]awscloudwatch.IMetric{},
				}),
				Threshold:          jsii.Number(1),
				EvaluationPeriods:  jsii.Number(1),
				ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
				TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
			})
			for _, t := range []awssns.ITopic{g.topic, stack} {
				al.AddAlarmAction(awscloudwatchactions.NewSnsAction(t))
				al.AddOkAction(awscloudwatchactions.NewSnsAction(t))
			}
			a.ByName[g.id+name] = al
		}
		if len(g.durable) > 0 {
			add("DeadLettered", fmt.Sprintf("A DURABLE subscription of %s (%s) dead-lettered an event: its handler failed and the event waits in the state table. Fix the handler, then run dlq-repair (docs/operations.md, 'Runbook: draining the dead-letter queues').", g.who, strings.Join(g.durable, ", ")),
				ownerQuery(keys.MetricDeadLettered, "Subscription", g.durable))
		}
		if len(g.local) > 0 {
			add("LocalFailures", fmt.Sprintf("A LOCAL handler of %s (%s) failed in the emitting service (EMF %s): LOCAL deliveries are not retried, so that effect did not happen. Read the emitting service's ERROR lines.", g.who, strings.Join(g.local, ", "), keys.MetricLocalFailures),
				ownerQuery(keys.MetricLocalFailures, "Subscription", g.local))
		}
		if len(g.types) > 0 {
			add("Unmatched", fmt.Sprintf("An event of a type %s emits (%s) matched no subscription of its lane (EMF %s by Lane and Type): a subscription is missing, misspelt or on another lane, and the event reached no handler there.", g.who, strings.Join(g.types, ", "), keys.MetricUnmatched),
				ownerQuery(keys.MetricUnmatched, "Type", g.types, "Lane"))
		}
	}
}

// isTopicArn: arn:PARTITION:sns:REGION:ACCOUNT:NAME.
func isTopicArn(arn string) bool {
	parts := strings.Split(arn, ":")
	return len(parts) == 6 && parts[0] == "arn" && parts[2] == "sns" && parts[5] != ""
}
