package backbone

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
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

// ownerErrors checks each module's AlarmTopicArn.
func ownerErrors(a app.Application) []error {
	var errs []error
	for _, m := range a.Modules {
		arn := m.AlarmTopicArn
		if arn == "" {
			continue
		}
		if !isTopicArn(arn) {
			errs = append(errs, fmt.Errorf("module %s of application %s: AlarmTopicArn %q is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", m.Spec.Name, a.Name, arn))
		}
		for _, name := range ownedNames(m) {
			if strings.ContainsAny(name, "'\\") {
				errs = append(errs, fmt.Errorf("module %s: %q cannot be named in an alarm's query (a quote or backslash)", m.Spec.Name, name))
			}
		}
	}
	return errs
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

// ownerAlarms gives every module that names an AlarmTopicArn alarms of its
// own, notifying that topic and the stack's (stack, ALARM and OK): its
// DURABLE subscriptions' dead letters (EMF DeadLettered by Subscription),
// its LOCAL handlers' failures (LocalHandlerFailures by Subscription) and
// its event types that matched no subscription (Unmatched by Lane and
// Type).
func (a *Alarms) ownerAlarms(application app.Application, stack awssns.ITopic) {
	for _, m := range application.Modules {
		if !isTopicArn(m.AlarmTopicArn) {
			continue // none, or refused by ownerErrors
		}
		id := "Owner" + alnum(m.Spec.Name)
		owner := awssns.Topic_FromTopicArn(a.Construct, jsii.String(id+"Topic"), jsii.String(m.AlarmTopicArn))
		var durable, local, types []string
		for _, s := range m.Spec.Subscribes {
			switch s.Lane {
			case catalog.Durable:
				durable = append(durable, s.Name)
			case catalog.Local:
				local = append(local, s.Name)
			}
		}
		for _, e := range m.Spec.Emits {
			types = append(types, e.Name)
		}
		add := func(name, description, query string) {
			al := awscloudwatch.NewAlarm(a.Construct, jsii.String(id+name), &awscloudwatch.AlarmProps{
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
			for _, t := range []awssns.ITopic{owner, stack} {
				al.AddAlarmAction(awscloudwatchactions.NewSnsAction(t))
				al.AddOkAction(awscloudwatchactions.NewSnsAction(t))
			}
			a.ByName[id+name] = al
		}
		if len(durable) > 0 {
			add("DeadLettered", fmt.Sprintf("A DURABLE subscription of module %s (%s) dead-lettered an event: its handler failed and the event waits in the state table. Fix the handler, then run dlq-repair (docs/operations.md, 'Runbook: draining the dead-letter queues').", m.Spec.Name, strings.Join(durable, ", ")),
				ownerQuery(keys.MetricDeadLettered, "Subscription", durable))
		}
		if len(local) > 0 {
			add("LocalFailures", fmt.Sprintf("A LOCAL handler of module %s (%s) failed in the emitting service (EMF %s): LOCAL deliveries are not retried, so that effect did not happen. Read the emitting service's ERROR lines.", m.Spec.Name, strings.Join(local, ", "), keys.MetricLocalFailures),
				ownerQuery(keys.MetricLocalFailures, "Subscription", local))
		}
		if len(types) > 0 {
			add("Unmatched", fmt.Sprintf("An event of a type module %s emits (%s) matched no subscription of its lane (EMF %s by Lane and Type): a subscription is missing, misspelt or on another lane, and the event reached no handler there.", m.Spec.Name, strings.Join(types, ", "), keys.MetricUnmatched),
				ownerQuery(keys.MetricUnmatched, "Type", types, "Lane"))
		}
	}
}

// isTopicArn: arn:PARTITION:sns:REGION:ACCOUNT:NAME.
func isTopicArn(arn string) bool {
	parts := strings.Split(arn, ":")
	return len(parts) == 6 && parts[0] == "arn" && parts[2] == "sns" && parts[5] != ""
}
