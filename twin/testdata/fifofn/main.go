// Command fifofn is a FIFO queue consumer for the twin's semantics tests:
// it prints each message it gets (id, group, deduplication id, body) and
// reports failed every message whose body is "fail" — but, against AWS's
// rule for FIFO queues, not the later messages of its group.
package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func handle(_ context.Context, e events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, m := range e.Records {
		fmt.Printf("fifofn: got %s group=%s dedup=%s body=%s\n", m.MessageId, m.Attributes["MessageGroupId"], m.Attributes["MessageDeduplicationId"], m.Body)
		if m.Body == "fail" {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp, nil
}

func main() { lambda.Start(handle) }
