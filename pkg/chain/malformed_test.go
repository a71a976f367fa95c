package chain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/chain"
)

// lineCase is a malformed-line class of the negative corpus: one edit of the
// bytes of a valid canonical export of tenant acme (10 events and the head,
// lines 1–11), and where the verdict must be: at seq Seq, or at line Line
// when the seq cannot be read. Each is a thing the spec forbids that
// encoding/json would repair or refuse without a verdict.
type lineCase struct {
	Name   string
	Seq    int64
	Line   int
	Reason chain.Reason
	Edit   func(lines []string) []string
}

// on4 replaces old by new in line 4 (seq 4), once; the test fails if old is
// not there.
func on4(old, new string) func([]string) []string {
	return func(lines []string) []string {
		if !strings.Contains(lines[3], old) {
			panic("line 4 has no " + old)
		}
		lines[3] = strings.Replace(lines[3], old, new, 1)
		return lines
	}
}

func deep(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }

func malformedCorpus() []lineCase {
	const payload = `"payload":{"order_id":"o-4","total_cents":400}`
	m := chain.ReasonMalformed
	return []lineCase{
		{"repeated payload member", 4, 0, m, on4(payload, payload+`,"payload":{"order_id":"o-4","total_cents":1}`)},
		{"repeated member inside the payload", 4, 0, m, on4(`"order_id":"o-4"`, `"order_id":"o-4","order_id":"o-5"`)},
		{"repeated tenant_id member", 4, 0, m, on4(`"tenant_id":"acme"`, `"tenant_id":"acme","tenant_id":"acme"`)},
		{"repeated seq member", 0, 4, m, on4(`"seq":4`, `"seq":4,"seq":4`)},
		{"invalid UTF-8 in the payload", 4, 0, m, on4(`"o-4"`, "\"o-\xff4\"")},
		{"surrogate encoded in UTF-8", 4, 0, m, on4(`"o-4"`, "\"o-\xed\xa0\x804\"")},
		{"lone surrogate escaped", 4, 0, m, on4(`"o-4"`, `"o-\ud8004"`)},
		{"lone low surrogate escaped in a name", 4, 0, m, on4(`"order_id"`, `"order_\udc00id"`)},
		{"empty optional member", 4, 0, m, on4(`{"hash"`, `{"actor_id":"","hash"`)},
		{"null optional member", 4, 0, m, on4(`{"hash"`, `{"correlation_id":null,"hash"`)},
		{"unknown member", 4, 0, m, on4(`"type":"order.placed"`, `"type":"order.placed","zzz":1`)},
		{"byte order mark", 1, 0, m, func(l []string) []string { l[0] = "\ufeff" + l[0]; return l }},
		{"schema_version written 1.0", 4, 0, m, on4(`"schema_version":1`, `"schema_version":1.0`)},
		{"schema_version beyond 2^53", 4, 0, m, on4(`"schema_version":1`, `"schema_version":9007199254740993`)},
		{"schema_version beyond 2^31", 4, 0, m, on4(`"schema_version":1`, `"schema_version":2147483648`)},
		{"schema_version a string", 4, 0, m, on4(`"schema_version":1`, `"schema_version":"1"`)},
		{"seq written 4.0", 0, 4, m, on4(`"seq":4`, `"seq":4.0`)},
		{"seq beyond 2^53", 0, 4, m, on4(`"seq":4`, `"seq":9007199254740993`)},
		{"seq a string", 0, 4, m, on4(`"seq":4`, `"seq":"4"`)},
		{"tenant_id not a string", 4, 0, m, on4(`"tenant_id":"acme"`, `"tenant_id":["acme"]`)},
		{"type not module.name", 4, 0, m, on4(`"type":"order.placed"`, `"type":"Order.placed"`)},
		{"occurred_at with a trailing zero", 4, 0, m, on4(`19:45:00Z`, `19:45:00.10Z`)},
		{"occurred_at not UTC", 4, 0, m, on4(`19:45:00Z`, `19:45:00+00:00`)},
		{"id in upper case", 4, 0, m, on4(`"id":"0190c5a8-7d4e-7c3b-9d1a-000000000004"`, `"id":"0190C5A8-7D4E-7C3B-9D1A-000000000004"`)},
		{"payload number below DynamoDB's range", 4, 0, m, on4(`400`, `1e-131`)},
		{"payload integer beyond 2^53", 4, 0, m, on4(`400`, `9007199254740993`)},
		{"payload nested 33 levels", 4, 0, m, on4(`400`, deep(32))},
		{"payload empty key", 4, 0, m, on4(`"order_id"`, `""`)},
		{"payload not an object", 4, 0, m, on4(payload, `"payload":[]`)},
		{"line not JSON", 0, 4, m, func(l []string) []string { l[3] = l[3][:len(l[3])/2]; return l }},
		{"line not an object", 0, 4, m, func(l []string) []string { l[3] = `[` + l[3] + `]`; return l }},
		{"line nested 65 levels", 0, 4, m, on4(`400`, deep(63))},
		{"head line with another member", 0, 11, m, func(l []string) []string { l[10] = strings.Replace(l[10], `{"head"`, `{"x":1,"head"`, 1); return l }},
		{"head line with last_seq 10.0", 0, 11, m, func(l []string) []string {
			l[10] = strings.Replace(l[10], `"last_seq":10`, `"last_seq":10.0`, 1)
			return l
		}},
		{"line after the head line", 0, 12, m, func(l []string) []string { return append(l, l[9]) }},
	}
}

// canonicalExport is the valid export every lineCase edits, as lines.
func canonicalExport(t testing.TB) []string {
	evs, head := validChain(t, "acme", 10)
	var buf bytes.Buffer
	if err := chain.WriteExport(&buf, chain.Export{Events: evs, Head: head}); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
}

func (c lineCase) export(t testing.TB) []byte {
	lines := c.Edit(canonicalExport(t))
	return []byte(strings.Join(lines, "\n") + "\n")
}

// TestMalformedLines checks each malformed-line class gets its verdict from
// both paths (in place and decoding), and writes the corpus with -update.
func TestMalformedLines(t *testing.T) {
	for _, c := range malformedCorpus() {
		t.Run(c.Name, func(t *testing.T) {
			data := c.export(t)
			_, fast := chain.VerifyExport(bytes.NewReader(data), "acme")
			checkWhere(t, fast, c.Seq, c.Line, c.Reason)
			_, slow := chain.VerifyExportDecoding(bytes.NewReader(data), "acme")
			if verdict(fast) != verdict(slow) {
				t.Errorf("in place %q, decoding %q", verdict(fast), verdict(slow))
			}
			// Without a tenant given, the same break.
			_, any := chain.VerifyExport(bytes.NewReader(data), "")
			checkWhere(t, any, c.Seq, c.Line, c.Reason)
			if *update {
				if err := os.WriteFile(filepath.Join("testdata", "negative", slug(c.Name)+".jsonl"), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func checkWhere(t *testing.T, err error, seq int64, line int, reason chain.Reason) {
	t.Helper()
	if line == 0 {
		checkBreak(t, err, seq, reason)
		return
	}
	be, ok := err.(*chain.BreakError)
	if !ok || be.Line != line || be.Seq != 0 || be.Reason != reason {
		t.Errorf("got %v, want %s at line %d", err, reason, line)
	}
}

// corpusVerdicts is every file of testdata/negative and the verdict its case
// names: "<reason> seq N" or "<reason> line L".
func corpusVerdicts(t *testing.T) map[string]string {
	want := map[string]string{}
	for _, c := range negativeCorpus(t) {
		want[slug(c.Name)] = string(c.Reason) + " seq " + strconv.FormatInt(c.Seq, 10)
	}
	for _, c := range malformedCorpus() {
		w := string(c.Reason) + " seq " + strconv.FormatInt(c.Seq, 10)
		if c.Line != 0 {
			w = string(c.Reason) + " line " + strconv.Itoa(c.Line)
		}
		want[slug(c.Name)] = w
	}
	return want
}

// TestDerivePyAgrees runs the second verifier, testdata/derive.py (Python
// standard library, written from SPEC.md), on every file of the negative
// corpus and on a valid export: the same verdict and seq (or line) as Go.
func TestDerivePyAgrees(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is missing; CI must run the second verifier")
		}
		t.Skip("python3 is missing")
	}
	want := corpusVerdicts(t)
	files, err := filepath.Glob(filepath.Join("testdata", "negative", "*.jsonl"))
	if err != nil || len(files) != len(want) {
		t.Fatalf("%d files in testdata/negative, want %d (%v; run go test ./pkg/chain -update)", len(files), len(want), err)
	}
	valid := filepath.Join(t.TempDir(), "valid.jsonl")
	if err := os.WriteFile(valid, []byte(strings.Join(canonicalExport(t), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want["valid"] = "intact"
	args := append([]string{filepath.Join("testdata", "derive.py"), "verify", "acme"}, append(files, valid)...)
	out, err := exec.Command(py, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("derive.py verify: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		file, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("derive.py printed %q", line)
		}
		got[strings.TrimSuffix(filepath.Base(file), ".jsonl")] = v
	}
	for name, w := range want {
		path := filepath.Join("testdata", "negative", name+".jsonl")
		if name == "valid" {
			path = valid
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, gerr := chain.VerifyExport(bytes.NewReader(data), "acme")
		goV := "intact"
		if be, ok := gerr.(*chain.BreakError); ok {
			goV = string(be.Reason) + " " + be.Where()
		} else if gerr != nil {
			goV = "error " + gerr.Error()
		}
		if goV != w {
			t.Errorf("%s: Go says %q, the corpus %q", name, goV, w)
		}
		if got[name] != w {
			t.Errorf("%s: derive.py says %q, want %q (Go: %q)", name, got[name], w, goV)
		}
	}
	t.Logf("derive.py and Go agree on %d exports", len(want))
}

// TestDerivePyAgreesUnderTampering tampers with random bytes of an export
// (bytes and tokens that reach the malformed-line classes included) and
// checks derive.py gives Go's verdict and seq (or line) for each, with the
// tenant given and without.
func TestDerivePyAgreesUnderTampering(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is missing; CI must run the second verifier")
		}
		t.Skip("python3 is missing")
	}
	evs, head := validChain(t, "acme", 8)
	evs[2].ActorID = "user \"7\""
	evs[4].Payload["note"] = "Zoë \u2028 \"quoted\" 😀 \x01"
	evs[5].Payload["ratio"] = json.Number("0.30000000000000004")
	evs[6].Payload["tiny"] = json.Number("1e-7")
	evs[6].Payload["nested"] = map[string]any{"\uFB01": []any{true, nil, "x"}, "😀": map[string]any{}}
	prev := chain.Genesis("acme")
	for i := range evs {
		evs[i].PrevHash = prev
		reseal(t, &evs[i])
		prev = evs[i].Hash
	}
	head.LastHash = prev
	var buf bytes.Buffer
	if err := chain.WriteExport(&buf, chain.Export{Events: evs, Head: head}); err != nil {
		t.Fatal(err)
	}
	clean := buf.Bytes()
	tokens := []string{`\ud800`, `\udc00`, `\ud83d\ude00`, "\xef\xbb\xbf", "\xed\xa0\x80", `"seq":5,`, `"payload":{},`,
		`"actor_id":"",`, `"actor_id":null,`, `null`, `""`, `1.0`, `9007199254740993`, `1e-131`, `"":1,`, `"zzz":1,`, "\n", "\r", " "}
	const alphabet = "0123456789abcdef\"{}[]:,.-eE \\\x00\xc3\xff"
	r := rand.New(rand.NewPCG(51, 52))
	n := 400
	if testing.Short() {
		n = 150
	}
	dir := t.TempDir()
	files := make([]string, n)
	for k := range files {
		data := bytes.Clone(clean)
		for range 1 + r.IntN(2) {
			i := r.IntN(len(data))
			switch r.IntN(4) {
			case 0:
				data[i] = alphabet[r.IntN(len(alphabet))]
			case 1:
				data = append(data[:i], data[i+1:]...)
			case 2:
				data = append(data[:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, data[i:]...)...)
			default:
				data = append(data[:i], append([]byte(tokens[r.IntN(len(tokens))]), data[i:]...)...)
			}
		}
		files[k] = filepath.Join(dir, fmt.Sprintf("t%04d.jsonl", k))
		if err := os.WriteFile(files[k], data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kinds := map[string]int{}
	for _, tenant := range []string{"acme", ""} {
		out, err := exec.Command(py, append([]string{filepath.Join("testdata", "derive.py"), "verify", tenant}, files...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("derive.py verify: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(files) {
			t.Fatalf("derive.py printed %d lines for %d files", len(lines), len(files))
		}
		for k, line := range lines {
			_, pyV, _ := strings.Cut(line, ": ")
			data, err := os.ReadFile(files[k])
			if err != nil {
				t.Fatal(err)
			}
			_, gerr := chain.VerifyExport(bytes.NewReader(data), tenant)
			goV := "intact"
			var be *chain.BreakError
			switch {
			case errors.As(gerr, &be):
				goV = string(be.Reason) + " " + be.Where()
			case errors.Is(gerr, chain.ErrEmptyExport):
				goV = "error empty export"
			case gerr != nil:
				goV = "error " + gerr.Error()
			}
			if goV != pyV {
				t.Errorf("tenant %q: Go %q, derive.py %q for\n%q", tenant, goV, pyV, data)
			}
			kinds[strings.Fields(goV)[0]]++
		}
	}
	t.Logf("verdicts: %v", kinds)
}
