package enrich_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/enrich"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// harness is a Handler with its logs and EMF lines captured.
type harness struct {
	h    *enrich.Handler
	logs *bytes.Buffer
	emf  *bytes.Buffer
}

func newHarness(t *testing.T) harness {
	t.Helper()
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	logs, emf := &bytes.Buffer{}, &bytes.Buffer{}
	h, err := enrich.New(enrich.Config{
		Catalog: cat, Logger: obs.NewLogger(logs, "info"), EMF: emf,
		Now: func() time.Time { return created.Add(1500 * time.Millisecond) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return harness{h: h, logs: logs, emf: emf}
}

// invoke runs the handler the way the Lambda runtime does: raw JSON payload
// in, raw JSON response out.
func (hs harness) invoke(t *testing.T, payload []byte) ([]byte, error) {
	t.Helper()
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-enrich-1"})
	return lambda.NewHandler(hs.h.Handle).Invoke(ctx, payload)
}

func jsonLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// metric sums an EMF metric per value of dimension dim.
func metric(t *testing.T, buf *bytes.Buffer, name, dim string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range jsonLines(t, buf) {
		aws, _ := m["_aws"].(map[string]any)
		cwm, _ := aws["CloudWatchMetrics"].([]any)
		if len(cwm) == 0 {
			t.Fatalf("EMF line without _aws.CloudWatchMetrics: %v", m)
		}
		if ns := cwm[0].(map[string]any)["Namespace"]; ns != keys.MetricNamespace {
			t.Errorf("EMF namespace: got %v, want %s", ns, keys.MetricNamespace)
		}
		if v, ok := m[name].(float64); ok {
			d, _ := m[dim].(string)
			out[d] += int(v)
		}
	}
	return out
}

func TestMixedBatch(t *testing.T) {
	hs := newHarness(t)
	out, err := hs.invoke(t, readFixture(t, fixtureMixed))
	if err != nil {
		t.Fatalf("mixed batch: %v\nlogs:\n%s", err, hs.logs)
	}

	var got []envelope.Envelope
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("response %s: %v", out, err)
	}
	a, g := acmeChain(t), globexChain(t)
	want := []envelope.Envelope{a[0], a[1], g[0], a[2]}
	if len(got) != len(want) {
		t.Fatalf("envelopes: got %d, want %d (acme 1, acme 2, globex 1, acme 3)\n%s", len(got), len(want), out)
	}
	for i := range want {
		gb, _ := got[i].CanonicalBytes()
		wb, _ := want[i].CanonicalBytes()
		if string(gb) != string(wb) || got[i].Hash != want[i].Hash {
			t.Errorf("envelope %d: got %s (hash %s), want %s (hash %s)", i, gb, got[i].Hash, wb, want[i].Hash)
		}
		if h, _ := chain.Hash(&got[i]); h != got[i].Hash {
			t.Errorf("envelope %d: hash %s does not verify after the JSON round trip (recomputed %s)", i, got[i].Hash, h)
		}
	}

	// The FIFO target reads $.tenant_id (group) and $.id (dedup) from each element.
	var elems []map[string]any
	_ = json.Unmarshal(out, &elems)
	for i, e := range elems {
		if e[keys.AttrTenant] != want[i].TenantID || e[keys.AttrID] != want[i].ID {
			t.Errorf("element %d: tenant_id %v id %v, want %s %s", i, e[keys.AttrTenant], e[keys.AttrID], want[i].TenantID, want[i].ID)
		}
		if _, ok := e["kind"]; ok {
			t.Errorf("element %d carries the row attribute kind; the target gets envelopes, not rows", i)
		}
	}

	if got, want := metric(t, hs.emf, keys.MetricDroppedRows, "Reason"),
		map[string]int{enrich.DropHeadRow: 4, enrich.DropModify: 1, enrich.DropRemove: 1}; !equal(got, want) {
		t.Errorf("DroppedRows by Reason: got %v, want %v", got, want)
	}
	if age := metric(t, hs.emf, keys.MetricPipeRecordAge, obs.KeyFunction); age[keys.FnStreamFilter] != 1500 {
		t.Errorf("PipeRecordAge: got %v, want 1500 ms for stream-filter", age)
	}

	drops := map[string][]map[string]any{}
	for _, l := range jsonLines(t, hs.logs) {
		if r, ok := l[obs.KeyReason].(string); ok && l["level"] == "WARN" {
			drops[r] = append(drops[r], l)
		}
		if l[obs.KeyRequestID] != "req-enrich-1" {
			t.Errorf("log line without the request id: %v", l)
		}
	}
	if n := len(drops[enrich.DropHeadRow]); n != 4 {
		t.Errorf("head-row drop log lines: got %d, want 4", n)
	}
	if l := drops[enrich.DropModify]; len(l) != 1 || l[0][obs.KeyTenant] != "acme" || l[0][obs.KeySeq] != 1.0 ||
		!strings.Contains(l[0]["msg"].(string), "insert-only") {
		t.Errorf("modify drop log: got %v, want one WARN for acme seq 1 saying the log is insert-only", l)
	}
	if l := drops[enrich.DropRemove]; len(l) != 1 || l[0][obs.KeyTenant] != "acme" || l[0][obs.KeySeq] != 2.0 ||
		!strings.Contains(l[0]["msg"].(string), "deleted") {
		t.Errorf("remove drop log: got %v, want one WARN for acme seq 2 saying an event row was deleted", l)
	}
}

func TestTamperedBatchFails(t *testing.T) {
	hs := newHarness(t)
	_, err := hs.invoke(t, readFixture(t, fixtureTampered))
	if err == nil {
		t.Fatal("tampered batch: got no error, want the whole batch to fail")
	}
	// Through the Lambda runtime the error is an InvokeResponse_Error; call
	// the handler directly for the typed error.
	var recs []json.RawMessage
	_ = json.Unmarshal(readFixture(t, fixtureTampered), &recs)
	out, err := hs.h.Handle(context.Background(), recs)
	if out != nil {
		t.Errorf("tampered batch: got %d envelopes, want none", len(out))
	}
	var re *enrich.RecordError
	if !errors.Is(err, enrich.ErrHashMismatch) || !errors.As(err, &re) {
		t.Fatalf("tampered batch: got %v, want a *RecordError wrapping ErrHashMismatch", err)
	}
	if re.Tenant != "acme" || re.Seq != 4 || re.Index != 10 {
		t.Errorf("rejected record: got tenant %q seq %d index %d, want acme 4 10", re.Tenant, re.Seq, re.Index)
	}
	var ie *chain.IntegrityError
	if !errors.As(err, &ie) || ie.Reason != chain.ReasonHashMismatch || ie.Tenant != "acme" || ie.Seq != 4 {
		t.Errorf("tampered batch: got %v, want a *chain.IntegrityError: hash mismatch at acme seq 4", err)
	}
	var rejected []map[string]any
	for _, l := range jsonLines(t, hs.logs) {
		if l["msg"] == "stream record rejected" {
			rejected = append(rejected, l)
		}
	}
	if len(rejected) != 2 { // once per invocation above
		t.Fatalf("rejection log lines: got %d, want 2\n%s", len(rejected), hs.logs)
	}
	if l := rejected[0]; l["level"] != "ERROR" || l[obs.KeyTenant] != "acme" || l[obs.KeySeq] != 4.0 || l[obs.KeyReason] != "hash_mismatch" {
		t.Errorf("rejection log: got %v, want ERROR acme seq 4 hash_mismatch", l)
	}
	if got := metric(t, hs.emf, keys.MetricRejectedRecords, "Reason"); got["hash_mismatch"] != 2 {
		t.Errorf("RejectedRecords: got %v, want hash_mismatch 2", got)
	}
}

// TestBatchFailures: every way a record fails the whole batch.
func TestBatchFailures(t *testing.T) {
	a := acmeChain(t)
	sealed := func(mut func(*envelope.Envelope)) events.DynamoDBEventRecord {
		e := a[1]
		mut(&e)
		if err := chain.Seal(&e); err != nil {
			t.Fatal(err)
		}
		return record("INSERT", 20, image(t, e), nil)
	}
	for _, tc := range []struct {
		name       string
		batch      func() []any
		want       error
		wantTenant string
		wantSeq    int64
	}{
		{"head row without dedup_id", func() []any {
			img := headImage(a[0])
			delete(img, keys.AttrDedupID)
			return batch(t, record("INSERT", 0, image(t, a[0]), nil), record("INSERT", 1, img, nil))
		}, enrich.ErrUnstampedHead, "acme", 0},
		{"head row without tenant_id", func() []any {
			img := headImage(a[1])
			delete(img, keys.AttrTenant)
			return batch(t, record("MODIFY", 1, img, headImage(a[0])))
		}, enrich.ErrUnstampedHead, "", 0},
		{"head dedup id equal to the event id", func() []any {
			img := headImage(a[0])
			img[keys.AttrDedupID] = events.NewStringAttribute(a[0].ID)
			return batch(t, record("INSERT", 1, img, nil))
		}, enrich.ErrUnstampedHead, "acme", 0},
		{"undeclared type whose hash does not match", func() []any {
			e := a[1]
			e.Type = "order.refunded" // edited after sealing: a new type is no excuse
			return batch(t, record("INSERT", 20, image(t, e), nil))
		}, enrich.ErrHashMismatch, "acme", 2},
		{"re-sealed event that does not link", func() []any {
			return batch(t, record("INSERT", 0, image(t, a[0]), nil),
				sealed(func(e *envelope.Envelope) { e.PrevHash = strings.Repeat("ab", 32) }))
		}, enrich.ErrBrokenLink, "acme", 2},
		{"seq not a number", func() []any {
			img := image(t, a[0])
			img[keys.AttrSeq] = events.NewStringAttribute("one")
			return batch(t, record("INSERT", 0, img, nil))
		}, enrich.ErrUndecodable, "acme", -1},
		{"event row without hash", func() []any {
			img := image(t, a[0])
			delete(img, keys.AttrHash)
			return batch(t, record("INSERT", 0, img, nil))
		}, enrich.ErrUndecodable, "acme", 1},
		{"unknown kind", func() []any {
			img := image(t, a[0])
			img[keys.AttrKind] = events.NewStringAttribute("snapshot")
			return batch(t, record("INSERT", 0, img, nil))
		}, enrich.ErrUndecodable, "acme", 1},
		{"event name none of INSERT, MODIFY, REMOVE", func() []any {
			return batch(t, record("EXPIRE", 0, nil, image(t, a[0])))
		}, enrich.ErrUndecodable, "acme", 1},
		{"not a record", func() []any { return []any{42} }, enrich.ErrUndecodable, "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t)
			raw, _ := json.Marshal(tc.batch())
			var recs []json.RawMessage
			if err := json.Unmarshal(raw, &recs); err != nil {
				t.Fatal(err)
			}
			out, err := hs.h.Handle(context.Background(), recs)
			var re *enrich.RecordError
			if !errors.Is(err, tc.want) || !errors.As(err, &re) {
				t.Fatalf("got %v, %v; want a *RecordError wrapping %v", out, err, tc.want)
			}
			if re.Tenant != tc.wantTenant || re.Seq != tc.wantSeq {
				t.Errorf("rejected record: got tenant %q seq %d, want %q %d (%v)", re.Tenant, re.Seq, tc.wantTenant, tc.wantSeq, err)
			}
			if !strings.Contains(hs.logs.String(), `"msg":"stream record rejected"`) {
				t.Errorf("no rejection logged:\n%s", hs.logs)
			}
		})
	}
}

// TestUndeclaredPassesLoudly: a producer deployed before the backbone
// writes a type, and a schema version, this build does not declare. Their
// hashes and links check out, so the batch passes whole, in order, the other
// tenant's events with it; each undeclared one is logged (WARN, naming type,
// version, tenant and seq) and counted by Type and Version; nothing is
// rejected.
func TestUndeclaredPassesLoudly(t *testing.T) {
	hs := newHarness(t)
	a, g := acmeChain(t), globexChain(t)
	next := a[1]
	next.Type = "order.refunded" // a type the producer's build added
	newer := a[2]
	newer.SchemaVersion = 9 // a version it added
	for _, e := range []*envelope.Envelope{&next, &newer} {
		if err := chain.Seal(e); err != nil {
			t.Fatal(err)
		}
	}
	newer.PrevHash = next.Hash
	if err := chain.Seal(&newer); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(batch(t,
		record("INSERT", 0, image(t, a[0]), nil), record("INSERT", 1, image(t, next), nil),
		record("INSERT", 2, image(t, g[0]), nil), record("INSERT", 3, image(t, newer), nil)))
	out, err := hs.invoke(t, raw)
	if err != nil {
		t.Fatalf("batch with undeclared events: %v\nlogs:\n%s", err, hs.logs)
	}
	var got []envelope.Envelope
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := []envelope.Envelope{a[0], next, g[0], newer}
	if len(got) != len(want) {
		t.Fatalf("envelopes: got %d, want %d: %s", len(got), len(want), out)
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].Type != want[i].Type || got[i].SchemaVersion != want[i].SchemaVersion || got[i].Hash != want[i].Hash {
			t.Errorf("envelope %d: %s %s v%d, want %s %s v%d", i, got[i].ID, got[i].Type, got[i].SchemaVersion, want[i].ID, want[i].Type, want[i].SchemaVersion)
		}
	}
	if got := metric(t, hs.emf, keys.MetricUndeclaredEvents, "Type"); !equal(got, map[string]int{"order.refunded": 1, a[2].Type: 1}) {
		t.Errorf("UndeclaredEvents by Type: %v, want order.refunded 1, %s 1", got, a[2].Type)
	}
	if got := metric(t, hs.emf, keys.MetricUndeclaredEvents, "Version"); !equal(got, map[string]int{"9": 1, strconv.Itoa(a[1].SchemaVersion): 1}) {
		t.Errorf("UndeclaredEvents by Version: %v, want %d (order.refunded) and 9", got, a[1].SchemaVersion)
	}
	if got := metric(t, hs.emf, keys.MetricRejectedRecords, "Reason"); len(got) != 0 {
		t.Errorf("RejectedRecords: %v, want none", got)
	}
	var warns []map[string]any
	for _, l := range jsonLines(t, hs.logs) {
		if l["level"] == "WARN" && strings.Contains(l["msg"].(string), "does not declare passed on") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 2 || warns[0][obs.KeyEventType] != "order.refunded" || warns[0][obs.KeySeq] != 2.0 ||
		warns[1][obs.KeyEventType] != a[2].Type || warns[1]["schema_version"] != 9.0 || warns[1][obs.KeyTenant] != "acme" {
		t.Errorf("undeclared warnings: %v, want order.refunded at acme seq 2, then %s v9 at acme seq 3", warns, a[2].Type)
	}
}

func TestAllDroppedIsEmptyArray(t *testing.T) {
	hs := newHarness(t)
	a := acmeChain(t)
	raw, _ := json.Marshal(batch(t, record("MODIFY", 3, headImage(a[1]), headImage(a[0]))))
	out, err := hs.invoke(t, raw)
	if err != nil || string(out) != "[]" {
		t.Errorf("batch of one head row: got %s, %v; want [] (the Pipe skips the target)", out, err)
	}
}

// An emit's idempotency-key row (kind "idempotency", negative seq) that reaches the
// enrichment (no Pipe filter) is dropped and counted; the events beside it still go on.
func TestIdempotencyRowDropped(t *testing.T) {
	hs := newHarness(t)
	a := acmeChain(t)
	keyRow := map[string]events.DynamoDBAttributeValue{
		keys.AttrTenant: events.NewStringAttribute("acme"),
		keys.AttrSeq:    events.NewNumberAttribute("-12345678901234567890"),
		keys.AttrKind:   events.NewStringAttribute(keys.KindIdempotency),
	}
	raw, _ := json.Marshal(batch(t, record("INSERT", 0, image(t, a[0]), nil), record("INSERT", 1, keyRow, nil)))
	out, err := hs.invoke(t, raw)
	if err != nil {
		t.Fatalf("batch with an idempotency row: %v\nlogs:\n%s", err, hs.logs)
	}
	var got []envelope.Envelope
	if err := json.Unmarshal(out, &got); err != nil || len(got) != 1 || got[0].ID != a[0].ID {
		t.Fatalf("got %s (%v), want the one event", out, err)
	}
	if got, want := metric(t, hs.emf, keys.MetricDroppedRows, "Reason"), map[string]int{enrich.DropIdempotencyRow: 1}; !equal(got, want) {
		t.Errorf("DroppedRows by Reason: got %v, want %v", got, want)
	}
}

func batch(t *testing.T, recs ...events.DynamoDBEventRecord) []any {
	t.Helper()
	out := make([]any, len(recs))
	for i, r := range recs {
		out[i] = r
	}
	return out
}

func equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
