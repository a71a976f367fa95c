// Command infra is the library's CDK app: its own stack with its own tables
// (loans, the tracked LOAN entity, with a NEW_AND_OLD_IMAGES stream; shelf,
// the shelf module's projection) and the fourlanes backbone running
// library.App. `cdk synth --app "go run ./examples/library/infra"` runs it.
//
// Context values: codeRoot, the folder of the library's built functions
// (<fn>/bootstrap; default "build/library"); stackName (default "Library");
// where the alarms go, one of alarmEmail, alarmTopicArn or
// noAlarmDestination (the reason for none; backbone.Props.AlarmsFromContext).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/examples/library/shelf"
	"github.com/fourlanes/fourlanes/infra/backbone"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	codeRoot := contextString(app, "codeRoot", "build/library")
	for _, fn := range keys.Functions {
		if p := filepath.Join(codeRoot, fn, "bootstrap"); !exists(p) {
			fmt.Fprintf(os.Stderr, "infra: %s is missing: build the library's functions (examples/library/functions) first\n", p)
			jsii.Close()
			os.Exit(1)
		}
	}
	st := awscdk.NewStack(app, jsii.String(contextString(app, "stackName", "Library")), &awscdk.StackProps{
		Description: jsii.String("library: a lending library on the fourlanes backbone"),
	})
	loansTable := awsdynamodb.NewTable(st, jsii.String("Loans"), &awsdynamodb.TableProps{
		PartitionKey:                     &awsdynamodb.Attribute{Name: jsii.String(loans.AttrTenant), Type: awsdynamodb.AttributeType_STRING},
		SortKey:                          &awsdynamodb.Attribute{Name: jsii.String(loans.AttrID), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:                      awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:                           awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: jsii.Bool(true)},
		DeletionProtection:               jsii.Bool(true),
		RemovalPolicy:                    awscdk.RemovalPolicy_RETAIN,
	})
	shelfTable := awsdynamodb.NewTable(st, jsii.String("Shelf"), &awsdynamodb.TableProps{
		PartitionKey:       &awsdynamodb.Attribute{Name: jsii.String(loans.AttrTenant), Type: awsdynamodb.AttributeType_STRING},
		SortKey:            &awsdynamodb.Attribute{Name: jsii.String(loans.AttrID), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:        awsdynamodb.BillingMode_PAY_PER_REQUEST,
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	})
	cdknag.NagSuppressions_AddResourceSuppressions(shelfTable, &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String("AwsSolutions-DDB3"),
		Reason: jsii.String("The shelf table is a projection, rebuilt from the loans table (which has point-in-time recovery) by re-applying versions."),
	}}, jsii.Bool(false))
	// The backbone's outputs and pinned logical IDs begin with its id
	// (BackboneEventsTableName, BackboneEventsTable, …); the CLI's -stack
	// finds them, as the stack holds one backbone.
	bp := &backbone.Props{
		App:                library.App,
		Tracked:            map[string]awsdynamodb.ITable{loans.Entity: loansTable},
		Tables:             map[string]awsdynamodb.ITable{shelf.EnvTable: shelfTable},
		CodeRoot:           codeRoot,
		ReserveConcurrency: contextString(app, "reserveConcurrency", "true") != "false",
		// A new stack never ran the per-pair claim layout: its deliveries
		// read one claim item per event from the start.
		PerPairClaimsGone: true,
	}
	bp.AlarmsFromContext(st)
	backbone.New(st, "Backbone", bp)
	app.Synth(nil)
}

func contextString(app awscdk.App, key, def string) string {
	if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok {
		return v
	}
	return def
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
