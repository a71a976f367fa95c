// Command infra is the orders example's CDK app: `cdk synth|diff|deploy` runs it
// (cdk.json: "go run ./examples/orders/infra") from the repository root.
//
// Context values (cdk.json or `cdk deploy -c key=value`):
//
//	alarmEmail          address subscribed to the stack's alarm topic
//	alarmTopicArn       an existing SNS topic every alarm notifies instead
//	noAlarmDestination  the reason the alarms may reach no one (a sandbox);
//	                    the template records it. One of the three is
//	                    required: the synthesis fails without.
//	notificationsAlarmEmail  address paged for the order email's dead letters
//	                    (the catalog's owner team-notifications), beside
//	                    the stack's topic; default alarmEmail
//	reserveConcurrency  "false" to reserve no concurrency (accounts whose
//	                    concurrency quota is still 10); default "true"
//	codeRoot            folder of the built functions (default "build")
//	stackName           the stack's name (default "Fourlanes", the name
//	                    existing deployments have)
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/examples/orders/infra/stack"
	"github.com/fourlanes/fourlanes/infra/backbone"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)

	codeRoot := contextString(app, "codeRoot", "build")
	if err := checkBuilt(codeRoot); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		jsii.Close()
		os.Exit(1)
	}
	// Environment-agnostic: the template is the same wherever it is
	// synthesized (tests, CI, a developer's machine) and deployable anywhere.
	bp := backbone.Props{
		CodeRoot:           codeRoot,
		ReserveConcurrency: contextString(app, "reserveConcurrency", "true") != "false",
	}
	bp.AlarmsFromContext(app)
	stack.NewStack(app, contextString(app, "stackName", "Fourlanes"), &stack.Props{Backbone: bp,
		NotificationsEmail: contextString(app, "notificationsAlarmEmail", "")})
	app.Synth(nil)
}

func contextString(app awscdk.App, key, def string) string {
	v := app.Node().TryGetContext(jsii.String(key))
	if v == nil {
		return def
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// checkBuilt fails early, and in plain words, when a function is not built:
// asset staging would otherwise fail with a less helpful error.
func checkBuilt(root string) error {
	for _, fn := range keys.Functions {
		p := filepath.Join(root, fn, "bootstrap")
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s is missing: build the functions first (make build)", p)
		}
	}
	return nil
}
