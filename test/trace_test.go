package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/pkg/tracing"
	"github.com/fourlanes/fourlanes/twin/cfn"
)

// spanSink is an OTLP/HTTP endpoint that keeps the spans the functions
// export (JSON, as pkg/tracing sends them).
type spanSink struct {
	*httptest.Server
	mu    sync.Mutex
	spans []sinkSpan
}

type sinkSpan struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Name         string `json:"name"`
	Links        []struct {
		TraceID string `json:"traceId"`
	} `json:"links"`
	Attributes []struct {
		Key   string `json:"key"`
		Value struct {
			String string `json:"stringValue"`
		} `json:"value"`
	} `json:"attributes"`
	function string // service.name of its resource
}

func newSpanSink(t *testing.T) *spanSink {
	s := &spanSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []struct {
						Key   string `json:"key"`
						Value struct {
							String string `json:"stringValue"`
						} `json:"value"`
					} `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []sinkSpan `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if r.URL.Path != "/v1/traces" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "want OTLP JSON on /v1/traces", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, rs := range req.ResourceSpans {
			fn := ""
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.name" {
					fn = a.Value.String
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					sp.function = fn
					s.spans = append(s.spans, sp)
				}
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *spanSink) find(traceID, name string) (sinkSpan, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range s.spans {
		if sp.TraceID == traceID && sp.Name == name {
			return sp, true
		}
	}
	return sinkSpan{}, false
}

// TestOneTraceThroughTheLog: a request's trace reaches, through the log,
// the stream, the Pipe and the queue, the DURABLE handler in durable-consumer,
// and, through the orders table's stream, the BEST_EFFORT handler in
// changefeed: each handler's span is a child of the emitting request's span,
// under its trace id, linked to the invocation that carried it.
func TestOneTraceThroughTheLog(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	sink := newSpanSink(t)
	s := startStack(t, func(tm *cfn.Template) {
		for _, r := range tm.OfType(cfn.TypeFunction) {
			r.SetProp(tracing.ModeOTel, "Environment", "Variables", keys.EnvTracing)
			r.SetProp(sink.URL+"/v1/traces", "Environment", "Variables", keys.EnvOTLPTracesEndpoint)
		}
	})
	var id [24]byte
	_, _ = rand.Read(id[:])
	traceID, parent := hex.EncodeToString(id[:16]), hex.EncodeToString(id[16:])
	// The emitting request's span: what an instrumented API handler has.
	ctx, _ := tracing.Continue(context.Background(), "place order", "00-"+traceID+"-"+parent+"-01")
	ctx = tenancy.MustWithTenant(ctx, "acme")
	o, err := s.app.Orders.Place(ctx, "x@acme.example", []orders.Item{{SKU: "sku-mug", Qty: 1}}, 1000, "EUR")
	if err != nil {
		t.Fatal(err)
	}
	evs := s.allEvents(t, "acme")
	if len(evs) != 1 || evs[0].TraceParent != "00-"+traceID+"-"+parent+"-01" {
		t.Fatalf("the log holds %+v; want order %s's one event carrying the request's traceparent", evs, o.ID)
	}
	for _, want := range []struct{ fn, span string }{
		{keys.FnDurableConsumer, "deliver notifications.order-email"},
		{keys.FnChangefeed, "dispatch search.orders"},
	} {
		eventually(t, 90*time.Second, want.fn+"'s span under trace "+traceID, func() (bool, string) {
			sp, ok := sink.find(traceID, want.span)
			if !ok {
				return false, fmt.Sprintf("no span %q under trace %s yet", want.span, traceID)
			}
			if sp.ParentSpanID != parent {
				return false, fmt.Sprintf("span %q has parent %s, want the request's span %s", want.span, sp.ParentSpanID, parent)
			}
			// service.name is the Lambda function's name (<stack>-<logical id>).
			if !strings.HasSuffix(sp.function, s.fn[want.fn]) {
				return false, fmt.Sprintf("span %q came from %q, want the %s function %s", want.span, sp.function, want.fn, s.fn[want.fn])
			}
			if len(sp.Links) != 1 || sp.Links[0].TraceID == traceID {
				return false, fmt.Sprintf("span %q links %+v, want one link to its invocation's trace", want.span, sp.Links)
			}
			return true, ""
		})
	}
}
