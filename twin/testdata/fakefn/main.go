// Command fakefn is the one Lambda function of the twin's fixture stack; the
// template's FAKE_ROLE variable picks what it does. It uses aws-lambda-go's
// event types, so the twin's payloads are checked against them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var db *dynamodb.Client

func count(ctx context.Context, pk string) error {
	_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(os.Getenv("DELIVERIES_TABLE")),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
		UpdateExpression:          aws.String("ADD n :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	})
	return err
}

func enrich(_ context.Context, recs []events.DynamoDBEventRecord) ([]map[string]any, error) {
	var out []map[string]any
	for _, r := range recs {
		img := r.Change.NewImage
		if _, ok := img["poison"]; ok {
			return nil, fmt.Errorf("poison record seq %s", r.Change.SequenceNumber)
		}
		e := map[string]any{"tenant_id": img["tenant_id"].String(), "kind": img["kind"].String(), "seq": img["seq"].Number()}
		if img["kind"].String() == "event" {
			e["id"] = img["id"].String()
		}
		out = append(out, e)
	}
	return out, nil
}

type work struct {
	TenantID string `json:"tenant_id"`
	ID       string `json:"id"`
	Seq      string `json:"seq"`
}

func consume(ctx context.Context, e events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, m := range e.Records {
		var w work
		if err := json.Unmarshal([]byte(m.Body), &w); err != nil {
			return resp, err
		}
		fmt.Printf("consumer: got %s group=%s receive=%s\n", w.ID, m.Attributes["MessageGroupId"], m.Attributes["ApproximateReceiveCount"])
		if w.TenantID == "slow" {
			time.Sleep(300 * time.Millisecond)
		}
		if w.TenantID == "bad" {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			continue
		}
		if err := count(ctx, "sqs#"+w.ID); err != nil {
			return resp, err
		}
	}
	return resp, nil
}

func feed(ctx context.Context, e events.DynamoDBEvent) error {
	for _, r := range e.Records {
		if _, ok := r.Change.NewImage["poison"]; ok {
			return errors.New("cannot apply " + r.Change.Keys["pk"].String())
		}
	}
	for _, r := range e.Records {
		if err := count(ctx, "feed#"+r.Change.Keys["pk"].String()); err != nil {
			return err
		}
	}
	return nil
}

func hello(_ context.Context, r events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	key := ""
	if a := r.RequestContext.Authorizer; a != nil && a.IAM != nil {
		key = a.IAM.AccessKey
	}
	return events.LambdaFunctionURLResponse{
		StatusCode: 201, Headers: map[string]string{"X-Twin": "yes"},
		Body: r.RequestContext.HTTP.Method + " " + r.RawPath + "?" + r.QueryStringParameters["q"] + " key=" + key + " body=" + r.Body,
	}, nil
}

func main() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Println("config:", err)
		os.Exit(1)
	}
	db = dynamodb.NewFromConfig(cfg)
	switch os.Getenv("FAKE_ROLE") {
	case "enrich":
		lambda.Start(enrich)
	case "sqs":
		lambda.Start(consume)
	case "stream":
		lambda.Start(feed)
	case "url":
		lambda.Start(hello)
	default:
		fmt.Println("FAKE_ROLE " + strconv.Quote(os.Getenv("FAKE_ROLE")) + " is unknown")
		os.Exit(2)
	}
}
