// Package wire builds what the entry points that read or write DynamoDB
// share: the AWS configuration, the application's modules bound for a
// function's lanes, and the recorder of the handlers' side effects.
package wire

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
)

// AWS returns the AWS configuration (awsenv.Load, traced), or fails.
func AWS(b *boot.Boot) aws.Config {
	return boot.Get(awsenv.Load(b.Ctx)).Or(b, "AWS configuration")
}

// Catalog validates a and returns its catalog (built once), or fails.
func Catalog(b *boot.Boot, a app.Application) *catalog.Catalog {
	return boot.Get(a.Check()).Or(b, "invalid application")
}

// Env requires names and the environment the modules of a on lanes read,
// all at once (the error names every one missing), or fails.
func Env(b *boot.Boot, a app.Application, lanes []catalog.Lane, names ...string) map[string]string {
	return boot.Get(awsenv.Require(append(names, a.Env(lanes...)...)...)).Or(b, "environment")
}

// Bind binds every module of a with a subscription on lanes, each given its
// Env from env, and returns the registry and the reappliers the modules
// offer, or fails.
func Bind(b *boot.Boot, a app.Application, cat *catalog.Catalog, env map[string]string, db *dynamodb.Client, stateTable string, lanes ...catalog.Lane) (*catalog.Registry, []app.Reapplier) {
	var (
		bindings []catalog.Binding
		re       []app.Reapplier
	)
	for _, m := range a.Runs(lanes...) {
		menv := make(map[string]string, len(m.Env))
		for _, n := range m.Env {
			menv[n] = env[n]
		}
		bound := boot.Get(m.Bind(app.Runtime{
			Function: b.Fn, DynamoDB: db, StateTable: stateTable, Env: menv, Logger: b.Log, Metrics: b.Metrics,
		})).Or(b, "binding module "+m.Spec.Name)
		bindings = append(bindings, bound.Binding)
		if bound.Reapplier != nil {
			re = append(re, bound.Reapplier)
		}
	}
	return boot.Get(catalog.NewRegistry(cat, bindings...)).Or(b, "registry"), re
}

// Effects returns the recorder of the handlers' side effects (effect.Do),
// kept in the state table, or fails.
func Effects(b *boot.Boot, db *dynamodb.Client, stateTable string) *effect.Recorder {
	return boot.Get(effect.New(effect.Config{Store: effect.NewDynamoStore(db, stateTable), Logger: b.Log, Metrics: b.Metrics})).Or(b, "effect recorder")
}
