// Command tamper-watch reads the events table's stream beside the Pipe (its
// own Lambda event source mapping, filtered to MODIFY and REMOVE records) and
// reports every change to the insert-only log (package pkg/tamper).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tamper"
)

func main() {
	log := obs.Setup()
	metrics := obs.NewMetrics(nil)
	h := &tamper.Handler{Log: log, Metrics: metrics}
	log.Info("tamper-watch watching the events stream for MODIFY and REMOVE", obs.KeyFunction, keys.FnTamperWatch)
	lambda.StartWithOptions(obs.PerInvocationErr(metrics, h.Handle), lambda.WithEnableSIGTERM(func() {
		log.Info("tamper-watch shutting down")
	}))
}
