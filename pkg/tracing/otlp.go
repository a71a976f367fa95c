//go:build !notrace

package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// otlpExporter sends spans over OTLP/HTTP with the JSON encoding the
// protocol defines (Content-Type application/json), which the ADOT
// collector's OTLP receiver accepts on localhost:4318. It stands in for
// otlptracehttp, whose protobuf encoding and generated gRPC service code
// double a function's binary; a function exports a few spans per
// invocation, so the encoding's cost is not the bottleneck.
type otlpExporter struct {
	url    string
	client *http.Client
}

func newOTLPExporter(url string) *otlpExporter {
	return &otlpExporter{url: url, client: &http.Client{Timeout: 2 * time.Second}}
}

var _ sdktrace.SpanExporter = (*otlpExporter)(nil)

func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body, err := json.Marshal(encodeSpans(spans))
	if err != nil {
		return fmt.Errorf("encode spans: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("export spans to %s: %w", e.url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("export %d spans: %w", len(spans), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("export %d spans to %s: HTTP %d: %s", len(spans), e.url, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

func (e *otlpExporter) Shutdown(context.Context) error { return nil }

// The OTLP JSON shapes (opentelemetry-proto, trace/v1): ids in hex, 64-bit
// integers as decimal strings, enums as numbers.
type (
	otlpRequest struct {
		ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	}
	otlpResourceSpans struct {
		Resource   otlpResource     `json:"resource"`
		ScopeSpans []otlpScopeSpans `json:"scopeSpans"`
	}
	otlpResource struct {
		Attributes []otlpKeyValue `json:"attributes,omitempty"`
	}
	otlpScopeSpans struct {
		Scope otlpScope  `json:"scope"`
		Spans []otlpSpan `json:"spans"`
	}
	otlpScope struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	}
	otlpSpan struct {
		TraceID      string         `json:"traceId"`
		SpanID       string         `json:"spanId"`
		ParentSpanID string         `json:"parentSpanId,omitempty"`
		Flags        uint32         `json:"flags,omitempty"`
		Name         string         `json:"name"`
		Kind         int            `json:"kind"`
		Start        string         `json:"startTimeUnixNano"`
		End          string         `json:"endTimeUnixNano"`
		Attributes   []otlpKeyValue `json:"attributes,omitempty"`
		Events       []otlpEvent    `json:"events,omitempty"`
		Links        []otlpLink     `json:"links,omitempty"`
		Status       otlpStatus     `json:"status"`
	}
	otlpEvent struct {
		Time       string         `json:"timeUnixNano"`
		Name       string         `json:"name"`
		Attributes []otlpKeyValue `json:"attributes,omitempty"`
	}
	otlpLink struct {
		TraceID string `json:"traceId"`
		SpanID  string `json:"spanId"`
	}
	otlpStatus struct {
		Code    int    `json:"code,omitempty"`
		Message string `json:"message,omitempty"`
	}
	otlpKeyValue struct {
		Key   string    `json:"key"`
		Value otlpValue `json:"value"`
	}
	otlpValue struct {
		String *string    `json:"stringValue,omitempty"`
		Bool   *bool      `json:"boolValue,omitempty"`
		Int    *string    `json:"intValue,omitempty"`
		Double *float64   `json:"doubleValue,omitempty"`
		Array  *otlpArray `json:"arrayValue,omitempty"`
	}
	otlpArray struct {
		Values []otlpValue `json:"values"`
	}
)

// encodeSpans groups spans by resource and scope, as OTLP nests them.
func encodeSpans(spans []sdktrace.ReadOnlySpan) otlpRequest {
	var req otlpRequest
	resources := map[string]int{} // resource -> index in ResourceSpans
	scopes := map[[2]string]int{} // (resource, scope) -> index in its ScopeSpans
	for _, s := range spans {
		rk := s.Resource().Encoded(attribute.DefaultEncoder())
		ri, ok := resources[rk]
		if !ok {
			req.ResourceSpans = append(req.ResourceSpans, otlpResourceSpans{Resource: otlpResource{Attributes: encodeAttrs(s.Resource().Attributes())}})
			ri = len(req.ResourceSpans) - 1
			resources[rk] = ri
		}
		rs := &req.ResourceSpans[ri]
		scope := s.InstrumentationScope()
		si, ok := scopes[[2]string{rk, scope.Name}]
		if !ok {
			rs.ScopeSpans = append(rs.ScopeSpans, otlpScopeSpans{Scope: otlpScope{Name: scope.Name, Version: scope.Version}})
			si = len(rs.ScopeSpans) - 1
			scopes[[2]string{rk, scope.Name}] = si
		}
		rs.ScopeSpans[si].Spans = append(rs.ScopeSpans[si].Spans, encodeSpan(s))
	}
	return req
}

func encodeSpan(s sdktrace.ReadOnlySpan) otlpSpan {
	sc := s.SpanContext()
	o := otlpSpan{
		TraceID:    sc.TraceID().String(),
		SpanID:     sc.SpanID().String(),
		Flags:      uint32(sc.TraceFlags()),
		Name:       s.Name(),
		Kind:       int(s.SpanKind()), // trace.SpanKind and OTLP's enum share their numbers
		Start:      nanos(s.StartTime()),
		End:        nanos(s.EndTime()),
		Attributes: encodeAttrs(s.Attributes()),
	}
	if p := s.Parent(); p.IsValid() {
		o.ParentSpanID = p.SpanID().String()
	}
	for _, ev := range s.Events() {
		o.Events = append(o.Events, otlpEvent{Time: nanos(ev.Time), Name: ev.Name, Attributes: encodeAttrs(ev.Attributes)})
	}
	for _, l := range s.Links() {
		o.Links = append(o.Links, otlpLink{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String()})
	}
	// OTLP: 0 unset, 1 ok, 2 error; codes: Unset 0, Error 1, Ok 2.
	switch s.Status().Code {
	case codes.Error:
		o.Status = otlpStatus{Code: 2, Message: s.Status().Description}
	case codes.Ok:
		o.Status = otlpStatus{Code: 1}
	}
	return o
}

func nanos(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

func encodeAttrs(kvs []attribute.KeyValue) []otlpKeyValue {
	out := make([]otlpKeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, otlpKeyValue{Key: string(kv.Key), Value: encodeValue(kv.Value)})
	}
	return out
}

func encodeValue(v attribute.Value) otlpValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return otlpValue{Bool: &b}
	case attribute.INT64:
		s := strconv.FormatInt(v.AsInt64(), 10)
		return otlpValue{Int: &s}
	case attribute.FLOAT64:
		f := v.AsFloat64()
		return otlpValue{Double: &f}
	case attribute.STRINGSLICE:
		a := &otlpArray{}
		for _, s := range v.AsStringSlice() {
			a.Values = append(a.Values, otlpValue{String: &s})
		}
		return otlpValue{Array: a}
	default:
		s := v.Emit()
		return otlpValue{String: &s}
	}
}
