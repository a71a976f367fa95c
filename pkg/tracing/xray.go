package tracing

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// X-Ray's trace header (X-Amzn-Trace-Id) and the form Lambda hands a
// function: in the invocation's context under lambdaTraceKey
// (aws-lambda-go), and in _X_AMZN_TRACE_ID:
//
//	Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1
//
// Root is "1-" + the first 8 hex digits of the 128-bit trace id (its start
// time in Unix seconds) + "-" + the other 24; Parent is the 64-bit span id.
// These few lines replace go.opentelemetry.io/contrib/propagators/aws,
// which its maintainers no longer support.
const (
	lambdaTraceKey = "x-amzn-trace-id"
	lambdaTraceEnv = "_X_AMZN_TRACE_ID"
)

// parseXRay returns the span context an X-Ray trace header names, remote; a
// header without a valid Root and Parent gives an invalid span context.
func parseXRay(h string) trace.SpanContext {
	var (
		cfg     trace.SpanContextConfig
		root    bool
		parent  bool
		sampled bool
	)
	for _, part := range strings.Split(h, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "Root":
			// 1-XXXXXXXX-YYYYYYYYYYYYYYYYYYYYYYYY
			if len(v) != 35 || v[0] != '1' || v[1] != '-' || v[10] != '-' {
				return trace.SpanContext{}
			}
			b, err := hex.DecodeString(v[2:10] + v[11:])
			if err != nil {
				return trace.SpanContext{}
			}
			copy(cfg.TraceID[:], b)
			root = true
		case "Parent":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != 8 {
				return trace.SpanContext{}
			}
			copy(cfg.SpanID[:], b)
			parent = true
		case "Sampled":
			sampled = v == "1"
		}
	}
	if !root || !parent {
		return trace.SpanContext{}
	}
	if sampled {
		cfg.TraceFlags = trace.FlagsSampled
	}
	cfg.Remote = true
	return trace.NewSpanContext(cfg)
}

// formatXRay is the X-Ray trace header of sc.
func formatXRay(sc trace.SpanContext) string {
	t := sc.TraceID().String()
	s := "0"
	if sc.IsSampled() {
		s = "1"
	}
	return "Root=1-" + t[:8] + "-" + t[8:] + ";Parent=" + sc.SpanID().String() + ";Sampled=" + s
}

// lambdaParent is the span context of Lambda's own segment for this
// invocation (active tracing, or an upstream sampled caller), or an invalid
// one outside Lambda.
func lambdaParent(ctx context.Context) trace.SpanContext {
	h, _ := ctx.Value(lambdaTraceKey).(string)
	if h == "" {
		h = os.Getenv(lambdaTraceEnv)
	}
	return parseXRay(h)
}

// xrayIDs makes trace ids X-Ray accepts: the first 32 bits are the start
// time in Unix seconds, the other 96 random. W3C readers treat them as any
// other 128-bit id.
type xrayIDs struct{}

func (xrayIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	binary.BigEndian.PutUint32(t[:4], uint32(time.Now().Unix()))
	_, _ = rand.Read(t[4:])
	return t, newSpanID()
}

func (xrayIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		_, _ = rand.Read(s[:])
	}
	return s
}
