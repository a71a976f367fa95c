// Command infra is the relay's CDK app: a stack holding the fourlanes
// backbone running relay.App, its functions from the folder the context
// value codeRoot names (<fn>/bootstrap).
package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/infra/backbone"
	"github.com/fourlanes/fourlanes/test/relay"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	codeRoot, _ := app.Node().TryGetContext(jsii.String("codeRoot")).(string)
	if codeRoot == "" {
		codeRoot = "build/relay"
	}
	st := awscdk.NewStack(app, jsii.String("Relay"), &awscdk.StackProps{
		Description: jsii.String("relay: A → B → C follow-on events on the fourlanes backbone"),
	})
	bp := backbone.Props{App: relay.App, CodeRoot: codeRoot, PerPairClaimsGone: true}
	bp.AlarmsFromContext(app) // the twin passes noAlarmDestination
	backbone.New(st, "Backbone", &bp)
	app.Synth(nil)
}
