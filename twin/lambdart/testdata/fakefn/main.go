// Command fakefn is a Lambda function for the runtime's tests: what it does
// is decided by the event.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type event struct {
	Echo    string `json:"echo"`
	Error   string `json:"error"`
	SleepMS int    `json:"sleep_ms"`
	Exit    bool   `json:"exit"`
	Panic   string `json:"panic"`
	Print   string `json:"print"`
	// Lines prints that many numbered lines ("line <i> of <request id>").
	Lines int `json:"lines"`
}

type response struct {
	Echo      string `json:"echo"`
	PID       int    `json:"pid"`
	RequestID string `json:"request_id"`
	ARN       string `json:"arn"`
	Env       string `json:"env"`
	Deadline  bool   `json:"deadline"`
}

func handle(ctx context.Context, e event) (response, error) {
	lc, _ := lambdacontext.FromContext(ctx)
	if e.Print != "" {
		fmt.Println(e.Print)
	}
	for i := range e.Lines {
		fmt.Printf("line %d of %s\n", i, lc.AwsRequestID)
	}
	if e.SleepMS > 0 {
		time.Sleep(time.Duration(e.SleepMS) * time.Millisecond)
	}
	if e.Exit {
		os.Exit(3)
	}
	if e.Panic != "" {
		panic(e.Panic)
	}
	if e.Error != "" {
		return response{}, errors.New(e.Error)
	}
	_, hasDeadline := ctx.Deadline()
	return response{Echo: e.Echo, PID: os.Getpid(), RequestID: lc.AwsRequestID, ARN: lc.InvokedFunctionArn, Env: os.Getenv("FAKE_SETTING"), Deadline: hasDeadline}, nil
}

func main() {
	lambda.StartWithOptions(handle, lambda.WithEnableSIGTERM(func() { fmt.Println("sigterm: flushed") }))
}
