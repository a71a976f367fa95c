// Package tracing is fourlanes' one seam for distributed tracing of AWS SDK
// calls. Every function builds its aws.Config through awsenv.Load, which calls
// Instrument; nothing else in the code base imports a tracing SDK.
//
// Instrument adds X-Ray subsegments to every SDK call when the environment
// variable FOURLANES_TRACING (keys.EnvTracing) is "xray" (the CDK app sets it
// beside Tracing: ACTIVE); any other value, or none, leaves the config alone.
//
// It promises that tracing never changes the outcome of a call:
//
//   - No segment in the context (tests, the CLI, the local twin without a
//     trace header): the call goes through untraced. The SDK's context-missing
//     strategy is set to log (once, as a warning on slog), never to panic.
//     AWS_XRAY_CONTEXT_MISSING=RUNTIME_ERROR would override that and is
//     reported at start-up.
//   - In Lambda, aws-lambda-go puts the invocation's trace header in the
//     context; the SDK makes a facade segment from it and sends subsegments
//     over UDP to the daemon address (AWS_XRAY_DAEMON_ADDRESS). UDP never
//     blocks a call, with or without a listening daemon.
//   - The X-Ray SDK's own log lines go to slog as JSON, not to stdout as text.
//
// Binary size: the X-Ray SDK pulls in aws-sdk-go v1. Build with the tag
// notrace (go build -tags notrace,lambda.norpc …) to compile Instrument to a
// no-op without the SDK; Available reports which one a binary has.
//
// # Swapping to OpenTelemetry
//
// The X-Ray SDKs reach end of support on 25 February 2027 (maintenance from
// 25 February 2026); AWS's path is OpenTelemetry (ADOT). To swap, change this
// package only:
//
//  1. Replace xray.go's instrument with
//     otelaws.AppendMiddlewares(&cfg.APIOptions) from
//     go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws,
//     after installing a TracerProvider (an OTLP exporter to the ADOT
//     collector layer, or the X-Ray exporter) and the X-Ray propagator
//     (go.opentelemetry.io/contrib/propagators/aws/xray) so traces keep
//     joining Lambda's active-tracing segment.
//  2. Wrap each handler with otellambda (go.opentelemetry.io/contrib/
//     instrumentation/github.com/aws/aws-lambda-go/otellambda) so the
//     invocation span exists, and flush the provider in the SIGTERM hook.
//  3. Accept FOURLANES_TRACING=otel beside (or instead of) xray, and update
//     the tests in this package; no call site changes.
package tracing
