package chain_test

import (
	"bytes"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/chain"
)

// BenchmarkVerify walks a 1,000-event chain of decoded events and its head:
// what reconcile does after reading DynamoDB.
func BenchmarkVerify(b *testing.B) {
	evs, head := validChain(b, "acme", 1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := chain.Verify("acme", evs, head); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyExport verifies the same chain as an export of canonical
// lines, hashed in place.
func BenchmarkVerifyExport(b *testing.B) {
	evs, head := validChain(b, "acme", 1000)
	var buf bytes.Buffer
	if err := chain.WriteExport(&buf, chain.Export{Events: evs, Head: head}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := chain.VerifyExport(bytes.NewReader(buf.Bytes()), "acme"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckStored checks one stored event on its own, as a consumer
// does with each message.
func BenchmarkCheckStored(b *testing.B) {
	evs, _ := validChain(b, "acme", 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := chain.CheckStored(&evs[0]); err != nil {
			b.Fatal(err)
		}
	}
}
