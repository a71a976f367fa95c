package chain_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
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

// orderChain is a chain of n events shaped like the bench's (bench/payload.go):
// about 1.1 KB of canonical bytes each, nested objects, an array of objects,
// non-ASCII strings, decimals, a long note.
func orderChain(b *testing.B, n int) ([]envelope.Envelope, *chain.Head) {
	b.Helper()
	evs := make([]envelope.Envelope, n)
	prev := chain.Genesis("tenant-bench")
	note := strings.Repeat("Please leave the parcel with the neighbour at number 7 if nobody is home. ", 4)[:280]
	for i := range evs {
		p, err := envelope.NormalizePayload(map[string]any{
			"order_id": fmt.Sprintf("o-%08d", i),
			"customer": map[string]any{"id": fmt.Sprintf("c-%05d", i%977), "name": "Zoë Müller", "email": "zoe.mueller@example.com", "tier": "gold"},
			"currency": "EUR",
			"total":    float64(i%100000)/100 + 269.24,
			"items": []any{
				map[string]any{"sku": "SKU-1001", "qty": 2, "price": 19.99, "title": "Blue mug, 350 ml"},
				map[string]any{"sku": "SKU-2002", "qty": 1, "price": 249.5, "title": "Espresso machine"},
				map[string]any{"sku": "SKU-3003", "qty": 12 + i%5, "price": 0.75, "title": "Paper filter (№ 4)"},
			},
			"shipping": map[string]any{"method": "express", "street": "Hauptstraße 5", "city": "Köln", "zip": "50667", "country": "DE"},
			"tags":     []any{"web", "promo-2026", "first-order"},
			"paid":     i%2 == 0,
			"coupon":   nil,
			"note":     note,
		})
		if err != nil {
			b.Fatal(err)
		}
		evs[i] = envelope.Envelope{
			ID: fmt.Sprintf("0190c5a8-7d4e-7c3b-9d1a-%012d", i+1), Type: "order.placed", TenantID: "tenant-bench",
			OccurredAt: "2026-11-29T19:45:00.123456789Z", SchemaVersion: 1, ActorID: "user-7", CorrelationID: fmt.Sprintf("corr-%d", i/10),
			Payload: p, Seq: int64(i + 1), PrevHash: prev,
		}
		if err := chain.Seal(&evs[i]); err != nil {
			b.Fatal(err)
		}
		prev = evs[i].Hash
	}
	return evs, &chain.Head{TenantID: "tenant-bench", LastSeq: int64(n), LastHash: prev}
}

// BenchmarkInPlace breaks the in-place paths down on bench-shaped events,
// each reporting MB/s of canonical bytes: raw SHA-256 over them (the
// ceiling), ScanCanonical alone, VerifyExport over canonical lines, and
// Verifier.NextItem over the events' DynamoDB rows.
func BenchmarkInPlace(b *testing.B) {
	evs, head := orderChain(b, 1000)
	canon := make([][]byte, len(evs))
	lines := make([][]byte, len(evs))
	rows := make([]envelope.Item, len(evs))
	var total int64
	for i := range evs {
		var err error
		if canon[i], err = evs[i].CanonicalBytes(); err != nil {
			b.Fatal(err)
		}
		if lines[i], err = evs[i].CanonicalJSON(); err != nil {
			b.Fatal(err)
		}
		if rows[i], err = evs[i].ToItem(); err != nil {
			b.Fatal(err)
		}
		total += int64(len(canon[i]))
	}
	var export bytes.Buffer
	if err := chain.WriteExport(&export, chain.Export{Events: evs, Head: head}); err != nil {
		b.Fatal(err)
	}
	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			for _, c := range canon {
				sha256.Sum256(c)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			for _, l := range lines {
				if _, ok := envelope.ScanCanonical(l); !ok {
					b.Fatalf("not canonical: %.80s", l)
				}
			}
		}
	})
	b.Run("export", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			sum, err := chain.VerifyExport(bytes.NewReader(export.Bytes()), "tenant-bench")
			if err != nil || sum.InPlace != int64(len(evs)) {
				b.Fatal(sum, err)
			}
		}
	})
	b.Run("rows", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			v := chain.NewVerifier("tenant-bench")
			for _, r := range rows {
				if handled, err := v.NextItem(r); err != nil || !handled {
					b.Fatal(handled, err)
				}
			}
			if err := v.Head(head); err != nil {
				b.Fatal(err)
			}
		}
	})
}
