//go:build !notrace

package tracing

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// instrument adds two steps to every client of cfg: a client span around
// the whole call (retries included), named "Service.Operation", and the
// call's X-Amzn-Trace-Id header so AWS services that trace (SQS, Lambda)
// continue it. It replaces the otelaws middleware of
// go.opentelemetry.io/contrib, which its maintainers no longer support and
// which links the DynamoDB, S3, SNS, SQS and Route 53 clients into every
// binary that uses it.
func instrument(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
		if err := s.Initialize.Add(spanStep{}, middleware.Before); err != nil {
			return err
		}
		return s.Build.Add(headerStep{}, middleware.After)
	})
}

type spanStep struct{}

func (spanStep) ID() string { return "fourlanes.tracing.span" }

func (spanStep) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
	ctx, span := tracer().Start(ctx, service+"."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrRPCSystem.String("aws-api"), attrRPCService.String(service), attrRPCMethod.String(op),
			attrRegion.String(awsmiddleware.GetRegion(ctx))))
	defer span.End()
	out, md, err := next.HandleInitialize(ctx, in)
	if id, ok := awsmiddleware.GetRequestIDMetadata(md); ok {
		span.SetAttributes(attrRequestID.String(id))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return out, md, err
}

type headerStep struct{}

func (headerStep) ID() string { return "fourlanes.tracing.header" }

func (headerStep) HandleBuild(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			req.Header.Set("X-Amzn-Trace-Id", formatXRay(sc))
		}
	}
	return next.HandleBuild(ctx, in)
}
