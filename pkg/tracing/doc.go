// Package tracing is fourlanes' one seam for distributed tracing, on
// OpenTelemetry. Every function builds its aws.Config through awsenv.Load,
// which calls Instrument, and wraps its handler with Invocation (pkg/serve);
// nothing else in the code base imports a tracing SDK.
//
// It is on when FOURLANES_TRACING (keys.EnvTracing) is "otel" (or "xray",
// what templates set before) and an OTLP/HTTP endpoint is configured
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT +
// "/v1/traces"); the construct sets both, pointing at the ADOT collector
// layer on localhost:4318 (Props.TraceEndpoint). Otherwise no provider is
// built, no span is recorded and Invocation returns the handler itself.
//
// On, it records:
//
//   - a server span per invocation, the child of Lambda's own segment (the
//     X-Ray trace header aws-lambda-go puts in the context), exported before
//     the handler returns since Lambda may freeze the process after;
//   - a client span per AWS SDK call ("DynamoDB.TransactWriteItems"), whose
//     X-Amzn-Trace-Id header lets SQS and Lambda continue the trace;
//   - a consumer span per event's work (Continue), the child of the span
//     that emitted the event (its envelope's W3C traceparent) and linked to
//     the invocation that carries the batch.
//
// Trace ids are X-Ray compatible (the first 32 bits are the start time), so
// spans join Lambda's active-tracing segments in X-Ray. The provider is built
// on first use; spans are sent as OTLP JSON by a small exporter of this
// package rather than otlptracehttp, whose protobuf and generated gRPC code
// would double a function's size.
//
// It promises that tracing never changes the outcome of a call: an
// unreachable or refusing collector costs at most the export timeout (2 s)
// per invocation and is logged as a warning ("trace export failed").
//
// Build with the tag notrace (go build -tags notrace,lambda.norpc …) to
// leave the OpenTelemetry SDK out; Available reports which one a binary has.
// Trace context read from an envelope still flows on in such a binary: a
// follow-on emit carries the trace it continued.
//
// The X-Ray SDK for Go (end of support 25 February 2027) is gone: it pulled
// in aws-sdk-go v1, gRPC and fasthttp, more than half a function's bytes.
package tracing
