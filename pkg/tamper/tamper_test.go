package tamper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tamper"
)

func fixture(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInspectFixtures: real stream record shapes (as Lambda delivers them,
// aws-lambda-go's events/testdata layout) with this project's attributes.
func TestInspectFixtures(t *testing.T) {
	tests := []struct {
		file   string
		change tamper.Change // "" = not tampering
		seq    string
		what   string // a part of Finding.What
	}{
		{"event-insert.json", "", "", ""},
		{"head-insert.json", "", "", ""},
		{"head-modify.json", "", "", ""},             // one Emit: last_seq 2 → 3
		{"head-modify-group.json", "", "", ""},       // group commit: 2 → 7 in one transaction
		{"head-modify-shards.json", "", "", ""},      // a tenant given 4 chain shards: its head records the count
		{"head-modify-shards-grow.json", "", "", ""}, // the count grown from 4 to 8
		{"event-modify.json", tamper.EventModified, "3", "changed: hash,payload"},
		{"event-remove.json", tamper.EventRemoved, "3", "id 0190c5a8-7f10-7a2b-8c3d-4e5f60718293, type order.paid"},
		{"event-remove-ttl.json", tamper.EventRemoved, "3", "event row deleted"},
		{"head-remove.json", tamper.HeadRemoved, "0", "last_seq 2"},
		{"head-modify-rollback.json", tamper.HeadModified, "0", "from last_seq 2 to 1"},
		{"head-modify-rehash.json", tamper.HeadModified, "0", "from last_seq 2 to 2"},
		{"head-modify-jump.json", tamper.HeadModified, "0", "advanced by 100"},
		{"head-modify-extra.json", tamper.HeadModified, "0", "attributes dedup_id,kind,last_event_id,last_hash,last_seq,note,seq,tenant_id"},
		{"head-modify-kind.json", tamper.HeadModified, "0", `kind "event"`},
		{"head-modify-dedup.json", tamper.HeadModified, "0", "dedup_id"},
		{"head-modify-shards-bad.json", tamper.HeadModified, "0", "new image of the head row has shards 99, want a number of chain shards (2 to 32)"},
		{"head-modify-shards-string.json", tamper.HeadModified, "0", "has shards not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, tampered := tamper.Inspect(fixture(t, tt.file))
			if tampered != (tt.change != "") {
				t.Fatalf("tampered = %v (%+v), want %v", tampered, f, tt.change != "")
			}
			if !tampered {
				return
			}
			if f.Change != tt.change || f.Tenant != "acme" || f.Seq != tt.seq {
				t.Errorf("got change %s tenant %q seq %q, want %s acme %q", f.Change, f.Tenant, f.Seq, tt.change, tt.seq)
			}
			if !strings.Contains(f.What, tt.what) {
				t.Errorf("what = %q, want it to contain %q", f.What, tt.what)
			}
			if f.EventID == "" || f.StreamSeq == "" {
				t.Errorf("finding does not identify the stream record: %+v", f)
			}
		})
	}
}

func TestInspectNamesTTLPrincipal(t *testing.T) {
	f, _ := tamper.Inspect(fixture(t, "event-remove-ttl.json"))
	if f.Principal != "Service:dynamodb.amazonaws.com" {
		t.Errorf("principal = %q, want Service:dynamodb.amazonaws.com", f.Principal)
	}
}

// TestInspectOtherRows: an idempotency-key row (negative seq, written once
// in the emit's transaction) is insert-only like every row of the log.
func TestInspectOtherRows(t *testing.T) {
	const old = `"OldImage":{"tenant_id":{"S":"acme"},"seq":{"N":"-1234567890123456789012345678901234567"},"kind":{"S":"idempotency"},"idempotency_key":{"S":"k1"},"event_id":{"S":"e1"},"event_seq":{"N":"3"}}`
	keys := `"Keys":{"tenant_id":{"S":"acme"},"seq":{"N":"-1234567890123456789012345678901234567"}}`
	tests := []struct {
		raw    string
		change tamper.Change
		what   string
	}{
		{`{"eventID":"7","eventName":"REMOVE","dynamodb":{` + keys + `,` + old + `}}`, tamper.RowRemoved, `kind "idempotency" deleted`},
		{`{"eventID":"8","eventName":"MODIFY","dynamodb":{` + keys + `,` + old + `,"NewImage":{"tenant_id":{"S":"acme"},"seq":{"N":"-1234567890123456789012345678901234567"},"kind":{"S":"idempotency"},"idempotency_key":{"S":"k1"},"event_id":{"S":"e9"},"event_seq":{"N":"9"}}}}`, tamper.RowModified, "changed: event_id,event_seq"},
	}
	for _, tt := range tests {
		f, ok := tamper.Inspect(json.RawMessage(tt.raw))
		if !ok || f.Change != tt.change || f.Seq != "-1234567890123456789012345678901234567" || !strings.Contains(f.What, tt.what) {
			t.Errorf("got %v %+v, want %s containing %q", ok, f, tt.change, tt.what)
		}
	}
}

// TestInspectUnreadable: what cannot be read is reported, never skipped.
func TestInspectUnreadable(t *testing.T) {
	tests := []struct{ name, raw string }{
		{"no key", `{"eventID":"1","eventName":"MODIFY","dynamodb":{"Keys":{},"SequenceNumber":"5"}}`},
		{"seq as string", `{"eventID":"2","eventName":"REMOVE","dynamodb":{"Keys":{"tenant_id":{"S":"t"},"seq":{"S":"3"}}}}`},
		{"undecodable attribute", `{"eventID":"3","eventName":"MODIFY","dynamodb":{"Keys":{"tenant_id":{"Q":"t"}}}}`},
		{"seq not a number", `{"eventID":"6","eventName":"REMOVE","dynamodb":{"Keys":{"tenant_id":{"S":"t"},"seq":{"N":"x"}}}}`},
		{"unknown event name", `{"eventID":"4","eventName":"TRUNCATE","dynamodb":{"Keys":{"tenant_id":{"S":"t"},"seq":{"N":"3"}}}}`},
		{"head without old image", `{"eventID":"5","eventName":"MODIFY","dynamodb":{"Keys":{"tenant_id":{"S":"t"},"seq":{"N":"0"}},"NewImage":{"kind":{"S":"head"}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, tampered := tamper.Inspect(json.RawMessage(tt.raw))
			if !tampered {
				t.Fatalf("not reported: %s", tt.raw)
			}
			if tt.name == "head without old image" {
				if f.Change != tamper.HeadModified {
					t.Errorf("change = %s, want %s", f.Change, tamper.HeadModified)
				}
				return
			}
			if f.Change != tamper.Unreadable || f.What == "" {
				t.Errorf("got %+v, want an unreadable finding that says why", f)
			}
		})
	}
	if _, tampered := tamper.Inspect(json.RawMessage(`{"eventName":"INSERT","dynamodb":{"Keys":{"tenant_id":{"Q":"x"}}}}`)); tampered {
		t.Error("an INSERT that does not decode was reported; inserts are not changes")
	}
}

// TestHandleLogsAndCounts runs a batch with one honest head advance, one
// insert and two changes through the handler: two ERROR lines naming tenant
// and seq, two EMF TamperDetected lines, and no error.
func TestHandleLogsAndCounts(t *testing.T) {
	var logs, metrics bytes.Buffer
	h := &tamper.Handler{Logger: obs.NewLogger(&logs, "info"), Metrics: obs.NewMetrics(&metrics)}
	ev := tamper.Event{Records: []json.RawMessage{
		fixture(t, "event-insert.json"), fixture(t, "head-modify.json"),
		fixture(t, "event-modify.json"), fixture(t, "head-remove.json"),
	}}
	if err := h.Handle(context.Background(), ev); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), logs.String())
	}
	want := []struct{ change, seq string }{{"event_modified", "3"}, {"head_removed", "0"}}
	for i, w := range want {
		l := lines[i]
		if l["level"] != "ERROR" || l[obs.KeyChange] != w.change || l[obs.KeyTenant] != "acme" || l[obs.KeySeq] != w.seq {
			t.Errorf("line %d = %v, want ERROR %s tenant acme seq %s", i, l, w.change, w.seq)
		}
		if msg, _ := l["msg"].(string); !strings.Contains(msg, `tenant "acme" seq `+w.seq) {
			t.Errorf("line %d msg %q does not name tenant and seq", i, msg)
		}
	}

	var emf []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(metrics.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("EMF line %q: %v", l, err)
		}
		emf = append(emf, m)
	}
	if len(emf) != 2 {
		t.Fatalf("%d EMF lines, want 2:\n%s", len(emf), metrics.String())
	}
	for i, w := range want {
		m := emf[i]
		if m[keys.MetricTamperDetected] != 1.0 || m["Change"] != w.change {
			t.Errorf("EMF line %d = %v, want %s = 1 with Change %s", i, m, keys.MetricTamperDetected, w.change)
		}
		b, _ := json.Marshal(m["_aws"])
		if !strings.Contains(string(b), `"Namespace":"`+keys.MetricNamespace+`"`) {
			t.Errorf("EMF line %d is not in namespace %s: %s", i, keys.MetricNamespace, b)
		}
	}
}

// TestHandleUnreadableRecordIsAFinding: in a batch of real stream records,
// one that is not a stream record at all (what a truncated or corrupted
// delivery would hand over) is a finding, an ERROR line and a
// TamperDetected metric with Change unreadable, and never a failed batch:
// the records beside it are inspected and reported as usual.
func TestHandleUnreadableRecordIsAFinding(t *testing.T) {
	var logs, metrics bytes.Buffer
	h := &tamper.Handler{Logger: obs.NewLogger(&logs, "info"), Metrics: obs.NewMetrics(&metrics)}
	var ev tamper.Event
	batch := `{"Records":[` + string(fixture(t, "event-modify.json")) + `,"not a record",{"eventName":"REMOVE","dynamodb":[1,2]},` +
		string(fixture(t, "head-modify.json")) + `]}`
	if err := json.Unmarshal([]byte(batch), &ev); err != nil {
		t.Fatalf("the batch does not decode as an Event: %v", err)
	}
	if err := h.Handle(context.Background(), ev); err != nil {
		t.Fatalf("Handle = %v, want nil: an unreadable record must not fail the batch", err)
	}
	var changes []string
	for _, l := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["level"] != "ERROR" {
			t.Errorf("line %v, want ERROR", m)
		}
		changes = append(changes, fmt.Sprint(m[obs.KeyChange]))
	}
	if want := []string{"event_modified", "unreadable", "unreadable"}; !slices.Equal(changes, want) {
		t.Errorf("findings %v, want %v", changes, want)
	}
	var unreadable int
	for _, l := range bytes.Split(bytes.TrimSpace(metrics.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("EMF line %q: %v", l, err)
		}
		if m["Change"] == string(tamper.Unreadable) && m[keys.MetricTamperDetected] == 1.0 {
			unreadable++
		}
	}
	if unreadable != 2 {
		t.Errorf("%d TamperDetected metrics with Change unreadable, want 2:\n%s", unreadable, metrics.String())
	}
}
