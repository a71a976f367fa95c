package obs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
)

// datum is one metric value as CloudWatch extracts it from an EMF document:
// a metric identity (namespace, name, dimensions) and its values.
type datum struct {
	Namespace, Name, Unit string
	Dims                  string // "k=v,k=v", sorted; "" for none
	Values                []float64
}

// extract checks that line is an EMF document exactly as the CloudWatch
// specification defines it, with no member it does not require, and returns
// its timestamp and the data CloudWatch would extract: one datum per metric
// and dimension set.
func extract(t *testing.T, line []byte) (int64, []datum) {
	t.Helper()
	var root map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		t.Fatalf("not one JSON object: %q: %v", line, err)
	}
	if dec.More() {
		t.Fatalf("data after the document: %q", line)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(root["_aws"], &meta); err != nil || len(meta) != 2 {
		t.Fatalf("_aws: want exactly Timestamp and CloudWatchMetrics: %s (%v)", root["_aws"], err)
	}
	var ts int64
	if err := json.Unmarshal(meta["Timestamp"], &ts); err != nil {
		t.Fatalf("_aws.Timestamp: want an integer: %s", meta["Timestamp"])
	}
	var directives []map[string]json.RawMessage
	if err := json.Unmarshal(meta["CloudWatchMetrics"], &directives); err != nil || len(directives) == 0 {
		t.Fatalf("_aws.CloudWatchMetrics: want a non-empty array of directives: %s", meta["CloudWatchMetrics"])
	}
	used := map[string]bool{"_aws": true}
	var out []datum
	metrics := 0
	for _, d := range directives {
		var ns string
		var sets [][]string
		var defs []map[string]string
		if len(d) != 3 || json.Unmarshal(d["Namespace"], &ns) != nil || json.Unmarshal(d["Dimensions"], &sets) != nil ||
			json.Unmarshal(d["Metrics"], &defs) != nil || sets == nil || len(sets) == 0 {
			t.Fatalf("directive: want exactly Namespace, Dimensions (an array of dimension sets) and Metrics: %v", d)
		}
		if len(defs) > 100 {
			t.Errorf("directive with %d metrics, the limit is 100", len(defs))
		}
		metrics += len(defs)
		for _, set := range sets {
			if len(set) > 30 {
				t.Errorf("dimension set of %d keys, the limit is 30", len(set))
			}
			var pairs []string
			for _, k := range set {
				var v string
				if err := json.Unmarshal(root[k], &v); err != nil {
					t.Fatalf("dimension %q: want a string member on the root: %s", k, root[k])
				}
				used[k] = true
				pairs = append(pairs, k+"="+v)
			}
			sort.Strings(pairs)
			for _, def := range defs {
				if len(def) != 2 || def["Name"] == "" || def["Unit"] == "" {
					t.Fatalf("metric definition: want exactly Name and Unit: %v", def)
				}
				raw := root[def["Name"]]
				var one json.Number
				var many []float64
				var values []float64
				if json.Unmarshal(raw, &one) == nil {
					f, _ := one.Float64()
					values = []float64{f}
				} else if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
					if len(many) > 100 {
						t.Errorf("metric %s with %d values, the limit is 100", def["Name"], len(many))
					}
					values = many
				} else {
					t.Fatalf("metric %s: want a number or an array of numbers on the root: %s", def["Name"], raw)
				}
				used[def["Name"]] = true
				out = append(out, datum{Namespace: ns, Name: def["Name"], Unit: def["Unit"], Dims: strings.Join(pairs, ","), Values: values})
			}
		}
	}
	if metrics > 100 {
		t.Errorf("document with %d metrics, the limit here is 100", metrics)
	}
	for k := range root {
		if !used[k] {
			t.Errorf("member %q is neither _aws, a dimension nor a metric", k)
		}
	}
	return ts, out
}

// extractAll extracts every line of out, and the sum of the values per
// identity, which must equal what was counted.
func extractAll(t *testing.T, out string) (lines int, data []datum) {
	t.Helper()
	for l := range strings.Lines(out) {
		_, ds := extract(t, []byte(l))
		data = append(data, ds...)
		lines++
	}
	return lines, data
}

// identities sums the extracted values per identity, as CloudWatch's Sum does.
func identities(data []datum) map[string]float64 {
	sums := map[string]float64{}
	for _, d := range data {
		k := d.Namespace + " " + d.Name + " {" + d.Dims + "} " + d.Unit
		for _, v := range d.Values {
			sums[k] += v
		}
	}
	return sums
}

func TestCountDocument(t *testing.T) {
	var buf bytes.Buffer
	before := time.Now().UnixMilli()
	obs.NewMetrics(&buf).Count(keys.MetricUnmatched, 2, "Lane", "DURABLE", "Type", "orders.placed")
	after := time.Now().UnixMilli()
	if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.HasSuffix(buf.String(), "\n") {
		t.Fatalf("got %d lines, want one document on one line: %q", n, buf.String())
	}
	ts, data := extract(t, buf.Bytes())
	if ts < before || ts > after {
		t.Errorf("Timestamp %d: want milliseconds since the epoch, between %d and %d", ts, before, after)
	}
	want := []datum{{Namespace: keys.MetricNamespace, Name: keys.MetricUnmatched, Unit: "Count", Dims: "Lane=DURABLE,Type=orders.placed", Values: []float64{2}}}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("extracted (-want +got):\n%s", diff)
	}
}

// TestCountNoDimensions: a metric without dimensions has one empty dimension
// set, which the specification allows (the removed library wrote
// "Dimensions":null, which it does not).
func TestCountNoDimensions(t *testing.T) {
	var buf bytes.Buffer
	obs.NewMetrics(&buf).Count(keys.MetricNotInLog, 1)
	if !strings.Contains(buf.String(), `"Dimensions":[[]]`) {
		t.Errorf("got %s, want one empty dimension set", buf.String())
	}
	_, data := extract(t, buf.Bytes())
	if len(data) != 1 || data[0].Dims != "" {
		t.Errorf("extracted %+v, want %s without dimensions", data, keys.MetricNotInLog)
	}
}

func TestMilliseconds(t *testing.T) {
	var buf bytes.Buffer
	obs.NewMetrics(&buf).Milliseconds(keys.MetricPipeRecordAge, 1500*time.Millisecond, obs.KeyFunction, keys.FnStreamFilter)
	_, data := extract(t, buf.Bytes())
	want := []datum{{Namespace: keys.MetricNamespace, Name: keys.MetricPipeRecordAge, Unit: "Milliseconds", Dims: "function=" + keys.FnStreamFilter, Values: []float64{1500}}}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("extracted (-want +got):\n%s", diff)
	}
}

// captureDefaultLog points slog's default logger at a buffer for the test.
func captureDefaultLog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return &buf
}

// TestInvalidDims: each rule of Count's repair, and its report, once per
// metric name and problem.
func TestInvalidDims(t *testing.T) {
	many := make([]string, 0, 64)
	for i := range 32 {
		many = append(many, fmt.Sprintf("K%02d", i), "v")
	}
	var kept []string
	for i := range 30 {
		kept = append(kept, fmt.Sprintf("K%02d=v", i))
	}
	for _, tc := range []struct {
		name     string
		metric   string
		dims     []string
		wantDims string // "-": nothing written
		report   string
	}{
		{"odd", "OddDims", []string{"Lane", "DURABLE", "Type"}, "Lane=DURABLE", "odd dims list"},
		{"one key", "OneKey", []string{"Lane"}, "", "odd dims list"},
		{"twice", "Twice", []string{"Lane", "DURABLE", "Lane", "BEST_EFFORT"}, "Lane=DURABLE", "given twice"},
		{"empty key", "EmptyKey", []string{"", "x", "Lane", "DURABLE"}, "Lane=DURABLE", "empty or the metric's own name"},
		{"own name", "OwnName", []string{"OwnName", "x"}, "", "empty or the metric's own name"},
		{"over 30", "Over30", many, strings.Join(kept, ","), "more than 30 dimensions"},
		{"no name", "", []string{"Lane", "DURABLE"}, "-", "needs a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := captureDefaultLog(t)
			var buf bytes.Buffer
			m := obs.NewMetrics(&buf)
			m.Count(tc.metric, 1, tc.dims...)
			m.Count(tc.metric, 1, tc.dims...)
			if tc.wantDims == "-" {
				if buf.Len() != 0 {
					t.Errorf("wrote %s, want nothing", buf.String())
				}
			} else {
				lines, data := extractAll(t, buf.String())
				if lines != 2 || len(data) != 2 || data[0].Dims != tc.wantDims {
					t.Errorf("got %d lines, %+v; want two counts with dimensions %q", lines, data, tc.wantDims)
				}
			}
			if n := strings.Count(logs.String(), tc.report); n != 1 {
				t.Errorf("reported %d times, want once (%q): %s", n, tc.report, logs.String())
			}
			if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), `"metric":"`+tc.metric+`"`) {
				t.Errorf("report: want an ERROR naming the metric: %s", logs.String())
			}
		})
	}
}

// withFunctionName plays a Lambda process named name.
func withFunctionName(t *testing.T, name string) {
	t.Helper()
	prev := lambdacontext.FunctionName
	lambdacontext.FunctionName = name
	t.Cleanup(func() { lambdacontext.FunctionName = prev })
}

func invocation(id string) context.Context {
	return lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
}

// TestPerInvocationKeepsIdentities: counted during an invocation, the same
// calls yield exactly the metric identities and sums they yield unbuffered,
// plus one identity per metric name with the Service dimension, in fewer
// documents, written only when the invocation ends.
func TestPerInvocationKeepsIdentities(t *testing.T) {
	withFunctionName(t, "fourlanes-durable-consumer")
	counts := func(m *obs.Metrics) {
		for range 3 {
			m.Count(keys.MetricDelivered, 1, "Subscription", "notifications.order-email")
		}
		m.Count(keys.MetricDelivered, 1, "Subscription", "search.projector")
		m.Count(keys.MetricDeadLettered, 1, "Subscription", "notifications.order-email")
		m.Count(keys.MetricUnmatched, 1, "Type", "orders.placed", "Lane", "DURABLE")
		m.Count(keys.MetricUnmatched, 2, "Lane", "DURABLE", "Type", "orders.placed") // same identity, other order
		m.Count(keys.MetricNotInLog, 1)
	}
	var plain bytes.Buffer
	counts(obs.NewMetrics(&plain))
	plainLines, plainData := extractAll(t, plain.String())

	var buf bytes.Buffer
	m := obs.NewMetrics(&buf)
	h := obs.PerInvocation(m, func(ctx context.Context, in string) (string, error) {
		counts(m)
		if buf.Len() != 0 {
			t.Errorf("written during the invocation: %s", buf.String())
		}
		return in, nil
	})
	if out, err := h(invocation("req-1"), "x"); out != "x" || err != nil {
		t.Fatalf("handler: got %q, %v; want its own result", out, err)
	}
	lines, data := extractAll(t, buf.String())

	want := identities(plainData)
	for _, name := range []string{keys.MetricDelivered, keys.MetricDeadLettered, keys.MetricUnmatched, keys.MetricNotInLog} {
		var sum float64
		for _, d := range plainData {
			if d.Name == name {
				sum += d.Values[0]
			}
		}
		want[keys.MetricNamespace+" "+name+" {Service=fourlanes-durable-consumer} Count"] = sum
	}
	if diff := cmp.Diff(want, identities(data)); diff != "" {
		t.Errorf("identities and sums (-want +got):\n%s", diff)
	}
	// Delivered twice (two subscriptions) cannot share a document.
	if lines != 2 || plainLines != 8 {
		t.Errorf("got %d documents (unbuffered %d), want 2 (8)", lines, plainLines)
	}
	// Each count stays a value, so Maximum and SampleCount are kept too.
	for _, d := range data {
		if d.Name == keys.MetricDelivered && d.Dims == "Subscription=notifications.order-email" && !slices.Equal(d.Values, []float64{1, 1, 1}) {
			t.Errorf("Delivered values %v, want [1 1 1]", d.Values)
		}
	}
}

// TestPerInvocationWritesOnFailure: the counts of an invocation that fails or
// panics are written too.
func TestPerInvocationWritesOnFailure(t *testing.T) {
	var buf bytes.Buffer
	m := obs.NewMetrics(&buf)
	boom := errors.New("boom")
	failing := obs.PerInvocation(m, func(ctx context.Context, _ int) (int, error) {
		m.Count(keys.MetricDeadLettered, 1, "Subscription", "a")
		return 0, boom
	})
	if _, err := failing(invocation("req-err"), 0); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the handler's error", err)
	}
	panicking := obs.PerInvocationErr(m, func(ctx context.Context, _ int) error {
		m.Count(keys.MetricChainBreaks, 1, "Mode", "full")
		panic("handler bug")
	})
	func() {
		defer func() {
			if r := recover(); r != "handler bug" {
				t.Errorf("recovered %v, want the handler's panic", r)
			}
		}()
		_ = panicking(invocation("req-panic"), 0)
	}()
	_, data := extractAll(t, buf.String())
	got := identities(data)
	for _, k := range []string{
		keys.MetricNamespace + " " + keys.MetricDeadLettered + " {Subscription=a} Count",
		keys.MetricNamespace + " " + keys.MetricChainBreaks + " {Mode=full} Count",
	} {
		if got[k] != 1 {
			t.Errorf("%s: got %v, want 1 (all: %v)", k, got[k], got)
		}
	}
}

// TestPerInvocationLimits: 150 metric names need two documents (100 + 50);
// 250 values of one metric need three (100 + 100 + 50).
func TestPerInvocationLimits(t *testing.T) {
	var buf bytes.Buffer
	m := obs.NewMetrics(&buf)
	h := obs.PerInvocationErr(m, func(ctx context.Context, _ struct{}) error {
		for i := range 150 {
			m.Count(fmt.Sprintf("M%03d", i), 1, "Lane", "DURABLE")
		}
		for i := range 250 {
			m.Count("Many", i, "Lane", "BEST_EFFORT")
		}
		return nil
	})
	_ = h(invocation("req-limits"), struct{}{})
	var perDoc []int
	values := 0
	var sum float64
	for l := range strings.Lines(buf.String()) {
		_, data := extract(t, []byte(l))
		perDoc = append(perDoc, len(data))
		for _, d := range data {
			if d.Name == "Many" {
				values += len(d.Values)
				for _, v := range d.Values {
					sum += v
				}
			}
		}
	}
	// M000..M149 all share Lane=DURABLE; Many (Lane=BEST_EFFORT) cannot join them.
	if want := []int{100, 50, 1, 1, 1}; !slices.Equal(perDoc, want) {
		t.Errorf("metrics per document %v, want %v", perDoc, want)
	}
	if values != 250 || sum != 249*250/2 {
		t.Errorf("Many: %d values summing to %v, want 250 summing to %d", values, sum, 249*250/2)
	}
}

// TestPerInvocationOutsideInvocation: counts at init or shutdown are written
// at once, with the Service dimension.
func TestPerInvocationOutsideInvocation(t *testing.T) {
	withFunctionName(t, "fourlanes-changefeed")
	var buf bytes.Buffer
	m := obs.NewMetrics(&buf)
	_ = obs.PerInvocationErr(m, func(context.Context, int) error { return nil })
	m.Count(keys.MetricChangeRejected, 1, "Reason", "no_tenant")
	_, data := extractAll(t, buf.String())
	want := map[string]float64{
		keys.MetricNamespace + " " + keys.MetricChangeRejected + " {Reason=no_tenant} Count":             1,
		keys.MetricNamespace + " " + keys.MetricChangeRejected + " {Service=fourlanes-changefeed} Count": 1,
	}
	if diff := cmp.Diff(want, identities(data)); diff != "" {
		t.Errorf("identities (-want +got):\n%s", diff)
	}
}

// TestPerInvocationNearDeadline: what an invocation counted is written
// before its deadline, while it still runs (Lambda would stop it there);
// what it counts later is written when it ends.
func TestPerInvocationNearDeadline(t *testing.T) {
	var buf obstest.Buffer // safe for concurrent use
	m := obs.NewMetrics(&buf)
	written := buf.String
	ctx, cancel := context.WithTimeout(invocation("req-slow"), 300*time.Millisecond)
	defer cancel()
	h := obs.PerInvocationErr(m, func(ctx context.Context, _ int) error {
		m.Count(keys.MetricDelivered, 1, "Subscription", "a")
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(written(), keys.MetricDelivered) {
			if time.Now().After(deadline) {
				t.Error("nothing written before the invocation's deadline")
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := ctx.Err(); err != nil {
			t.Errorf("written only after the deadline (%v)", err)
		}
		m.Count(keys.MetricDeadLettered, 1, "Subscription", "a")
		return nil
	})
	_ = h(ctx, 0)
	_, data := extractAll(t, written())
	got := identities(data)
	if got[keys.MetricNamespace+" "+keys.MetricDelivered+" {Subscription=a} Count"] != 1 ||
		got[keys.MetricNamespace+" "+keys.MetricDeadLettered+" {Subscription=a} Count"] != 1 {
		t.Errorf("got %v, want Delivered and DeadLettered once each", got)
	}
}

// TestPerInvocationConcurrent: invocations that overlap (Lambda managed
// instances run several in one process) lose and repeat no count.
func TestPerInvocationConcurrent(t *testing.T) {
	var buf obstest.Buffer // safe for concurrent use
	m := obs.NewMetrics(&buf)
	h := obs.PerInvocationErr(m, func(ctx context.Context, n int) error {
		for range n {
			m.Count(keys.MetricDelivered, 1, "Subscription", "a")
		}
		return nil
	})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { _ = h(invocation(fmt.Sprint("req-", i)), 30) })
	}
	wg.Wait()
	_, data := extractAll(t, buf.String())
	if got := identities(data)[keys.MetricNamespace+" "+keys.MetricDelivered+" {Subscription=a} Count"]; got != 600 {
		t.Errorf("Delivered sum %v, want 600", got)
	}
}

// TestPerInvocationNil: a nil *Metrics writes to stdout, and PerInvocation(nil,
// …) buffers what components without a Metrics count.
func TestPerInvocationNil(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	prev := os.Stdout
	os.Stdout = w
	t.Cleanup(func() { os.Stdout = prev })
	var unwired *obs.Metrics
	h := obs.PerInvocationErr(nil, func(ctx context.Context, _ int) error {
		unwired.Count(keys.MetricChainBreaks, 1, "Mode", "incremental")
		unwired.Count(keys.MetricChainBreaks, 1, "Mode", "incremental")
		return nil
	})
	_ = h(invocation("req-nil"), 0)
	os.Stdout = prev
	_ = w.Close()
	out, _ := io.ReadAll(r)
	lines, data := extractAll(t, string(out))
	if lines != 1 || len(data) != 1 || !slices.Equal(data[0].Values, []float64{1, 1}) {
		t.Errorf("got %d lines %+v, want one document with ChainBreaks [1 1]", lines, data)
	}
}
