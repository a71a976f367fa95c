//go:build !notrace

package tracing

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Available reports whether this binary contains the OpenTelemetry SDK (it
// does unless built with -tags notrace).
const Available = true

var (
	providerOnce sync.Once
	provider     *sdktrace.TracerProvider
	// exporterFor is the exporter the provider sends to; tests replace it
	// to read spans in memory.
	exporterFor = func(endpoint string) sdktrace.SpanExporter { return newOTLPExporter(endpoint) }
)

// tracer returns fourlanes' tracer, building the provider on first use so
// that a function whose first invocation records nothing pays nothing at
// start-up.
func tracer() trace.Tracer {
	providerOnce.Do(func() {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			slog.Warn("OpenTelemetry reported an error", obs.Err(err), slog.String(obs.KeyEndpoint, Endpoint()))
		}))
		attrs := []attribute.KeyValue{attrCloud.String("aws")}
		name := os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
		if v := os.Getenv(keys.EnvOTelServiceName); v != "" {
			attrs = append(attrs, attrServiceName.String(v))
		} else if name != "" {
			attrs = append(attrs, attrServiceName.String(name))
		}
		if name != "" {
			attrs = append(attrs, attrFaaSName.String(name))
		}
		provider = sdktrace.NewTracerProvider(
			sdktrace.WithBatcher(exporterFor(Endpoint()), sdktrace.WithBatchTimeout(time.Second)),
			sdktrace.WithIDGenerator(xrayIDs{}),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
			sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		)
	})
	return provider.Tracer(scopeName)
}

const scopeName = "github.com/fourlanes/fourlanes/pkg/tracing"

// flush exports the spans recorded so far; a failure is logged, never
// returned: tracing never changes an invocation's outcome.
func flush(ctx context.Context) {
	if provider == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := provider.ForceFlush(ctx); err != nil {
		slog.WarnContext(ctx, "trace export failed; this invocation's spans are lost",
			slog.String(obs.KeyEndpoint, Endpoint()), obs.Err(err))
	}
}

func shutdown(ctx context.Context) {
	if provider == nil {
		return
	}
	if err := provider.Shutdown(ctx); err != nil {
		slog.WarnContext(ctx, "trace export at shutdown failed",
			slog.String(obs.KeyEndpoint, Endpoint()), obs.Err(err))
	}
}
