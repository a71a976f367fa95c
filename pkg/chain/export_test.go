package chain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// decodedOrder rewrites every event line of an export in encoding/json's
// member order (the struct's), so no line is canonical and VerifyExport
// decodes them all: the form exports had before lines were canonical.
func decodedOrder(t testing.TB, export []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, line := range bytes.Split(bytes.TrimSpace(export), []byte("\n")) {
		if e, err := envelope.FromJSON(line); err == nil {
			b, err := json.Marshal(&e)
			if err != nil {
				t.Fatal(err)
			}
			line = b
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// verdict is an outcome of verifying an export, comparable across paths.
func verdict(err error) string {
	var be *chain.BreakError
	if errors.As(err, &be) {
		return fmt.Sprintf("break %s %s %s (expected %s, got %s)", be.Tenant, be.Where(), be.Reason, be.Expected, be.Got)
	}
	if err != nil {
		return "error " + err.Error()
	}
	return "intact"
}

// TestVerifyExportNegativeCorpus re-verifies the checked-in corpus (the
// files another implementation can test itself against), in its canonical
// lines and in decoded order, by both paths: the same break each time.
func TestVerifyExportNegativeCorpus(t *testing.T) {
	want := map[string]negCase{}
	for _, c := range negativeCorpus(t) {
		want[slug(c.Name)] = c
	}
	all := corpusVerdicts(t)
	files, err := filepath.Glob(filepath.Join("testdata", "negative", "*.jsonl"))
	if err != nil || len(files) != len(all) {
		t.Fatalf("%d files in testdata/negative, want %d (%v; run go test ./pkg/chain -update)", len(files), len(all), err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		if _, ok := all[name]; ok && want[name].Name == "" {
			continue // a malformed line: TestMalformedLines and TestDerivePyAgrees
		}
		c, ok := want[name]
		if !ok {
			t.Errorf("%s: no such case in the corpus", f)
			continue
		}
		t.Run(name, func(t *testing.T) {
			canon, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for form, data := range map[string][]byte{"canonical lines": canon, "decoded order": decodedOrder(t, canon)} {
				sum, err := chain.VerifyExport(bytes.NewReader(data), "acme")
				checkBreak(t, err, c.Seq, c.Reason)
				_, slow := chain.VerifyExportDecoding(bytes.NewReader(data), "acme")
				if verdict(err) != verdict(slow) {
					t.Errorf("%s: in place %q, decoding %q", form, verdict(err), verdict(slow))
				}
				if form == "decoded order" && sum.InPlace != 0 {
					t.Errorf("%s: %d lines hashed in place, want 0", form, sum.InPlace)
				}
			}
		})
	}
}

// oddChain is validChain of n events for "acme" with the shapes the fast
// paths must hand to decoding or carry exactly, resealed: an escape in an
// envelope field (event escaped), a payload string with non-ASCII text,
// U+2028 and quotes (event unicode), and a number that needs the shortest
// round-trip form (event ratio).
func oddChain(t *testing.T, n, escaped, unicode, ratio int) ([]envelope.Envelope, *chain.Head) {
	t.Helper()
	evs, head := validChain(t, "acme", n)
	evs[escaped].ActorID = "user \"7\""
	evs[unicode].Payload["note"] = "Zoë \u2028 \"quoted\" 😀"
	evs[ratio].Payload["ratio"] = json.Number("0.30000000000000004")
	prev := chain.Genesis("acme")
	for i := range evs {
		evs[i].PrevHash = prev
		reseal(t, &evs[i])
		prev = evs[i].Hash
	}
	head.LastHash = prev
	return evs, head
}

// TestVerifyExportAgreesUnderTampering tampers with random bytes of a
// canonical export and checks both paths give the same verdict, error text
// included.
func TestVerifyExportAgreesUnderTampering(t *testing.T) {
	evs, head := oddChain(t, 12, 4, 7, 9)
	var buf bytes.Buffer
	if err := chain.WriteExport(&buf, chain.Export{Events: evs, Head: head}); err != nil {
		t.Fatal(err)
	}
	clean := buf.Bytes()
	sum, err := chain.VerifyExport(bytes.NewReader(clean), "")
	if err != nil {
		t.Fatal(err)
	}
	// Only the event with an escape in an envelope field is decoded.
	if sum.Tenant != "acme" || sum.Events != 12 || sum.InPlace != 11 {
		t.Fatalf("got %+v, want tenant acme, 12 events, 11 in place", sum)
	}
	const alphabet = "0123456789abcdef\"{}[]:,.-e \\\x00\xc3"
	r := rand.New(rand.NewPCG(41, 42))
	n := 5000
	if testing.Short() {
		n = 1000
	}
	kinds := map[string]int{}
	for range n {
		data := bytes.Clone(clean)
		for range 1 + r.IntN(2) {
			i := r.IntN(len(data))
			switch r.IntN(3) {
			case 0:
				data[i] = alphabet[r.IntN(len(alphabet))]
			case 1:
				data = append(data[:i], data[i+1:]...)
			default:
				data = append(data[:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, data[i:]...)...)
			}
		}
		tenant := []string{"", "acme"}[r.IntN(2)]
		_, fast := chain.VerifyExport(bytes.NewReader(data), tenant)
		_, slow := chain.VerifyExportDecoding(bytes.NewReader(data), tenant)
		if verdict(fast) != verdict(slow) {
			t.Fatalf("verdicts differ for tenant %q:\n in place %s\n decoding %s\nexport:\n%s", tenant, verdict(fast), verdict(slow), data)
		}
		kinds[strings.SplitN(verdict(fast), " ", 2)[0]]++
	}
	t.Logf("verdicts: %v", kinds)
	if kinds["break"] < n/4 {
		t.Errorf("only %d of %d tamperings broke the chain: the mutations do not reach the hashed bytes", kinds["break"], n)
	}
}

// TestVerifyExportStreams checks the summary and the errors that are not
// breaks.
func TestVerifyExportStreams(t *testing.T) {
	evs, head := validChain(t, "acme", 3)
	var buf bytes.Buffer
	if err := chain.WriteExport(&buf, chain.Export{Events: evs, Head: head}); err != nil {
		t.Fatal(err)
	}
	export := buf.String()
	for _, tc := range []struct {
		name, data, tenant, want string
	}{
		{"intact", export, "", "intact"},
		{"other tenant expected", export, "globex", `break globex seq 1 wrong tenant (expected "globex", got "acme")`},
		{"data after the head", export + export, "", "break acme line 5 malformed event (expected an event line with a readable seq, or the head line last, got a line after the head line)"},
		{"not JSON", "{\n", "", "break  line 1 malformed event (expected an event line with a readable seq, or the head line last, got not a JSON object: byte 1: unexpected EOF, expected a member name)"},
		{"empty", "\n\n", "", "error " + chain.ErrEmptyExport.Error()},
		{"head only", `{"head":{"tenant_id":"acme","last_seq":2,"last_hash":"` + head.LastHash + `"}}` + "\n", "",
			"break acme seq 1 head mismatch (expected last_seq 0, got last_seq 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chain.VerifyExport(strings.NewReader(tc.data), tc.tenant)
			if got := verdict(err); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	// Every line WriteExport writes for these events is canonical.
	sum, err := chain.VerifyExport(strings.NewReader(export), "")
	if err != nil || sum.InPlace != 3 || sum.Head == nil || sum.Head.LastSeq != 3 {
		t.Fatalf("got %+v, %v", sum, err)
	}
}
