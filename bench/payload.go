package main

import (
	"fmt"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// targetItemBytes is the size of the bench's event rows: about 1 KB, and
// under 1,024 bytes so that one event is one billed KB (2 WCU in a
// transaction on AWS) — the model minimum the emit table compares with.
const targetItemBytes = 1000

const benchTenant = "tenant-bench"

// orderPayload is a realistic order event: nested objects, an array, strings
// with non-ASCII characters, integers and decimals, booleans, a null; i
// varies the content and note pads it.
func orderPayload(i, note int) map[string]any {
	raw := map[string]any{
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
		"note":     pad(note),
	}
	p, err := envelope.NormalizePayload(raw)
	if err != nil {
		panic(fmt.Sprintf("bench payload: %v", err)) // a fixed, valid shape
	}
	return p
}

func pad(n int) string {
	const text = "Please leave the parcel with the neighbour at number 7 if nobody is home. "
	return strings.Repeat(text, n/len(text)+1)[:n]
}

// sizedEvent returns the note length that makes an event row of
// orderPayload about targetItemBytes, and that row's size.
func sizedEvent() (note, rowBytes int) {
	size := func(note int) int {
		e := sampleEnvelope(orderPayload(99999999, note))
		it, err := e.ToItem()
		if err != nil {
			panic(fmt.Sprintf("bench sample event: %v", err))
		}
		return itemBytes(it)
	}
	base := size(0)
	note = max(0, targetItemBytes-base)
	return note, size(note)
}

// sampleEnvelope is a stored event with the longest field spellings the
// bench produces (nanosecond timestamp, seven-digit seq).
func sampleEnvelope(p map[string]any) envelope.Envelope {
	return envelope.Envelope{
		ID:            "0190c5a8-7d4e-7c3b-9d1a-2b3c4d5e6f70",
		Type:          "order.placed",
		TenantID:      benchTenant,
		OccurredAt:    "2026-11-29T19:45:00.123456789Z",
		SchemaVersion: 1,
		Payload:       p,
		Seq:           1234567,
		PrevHash:      strings.Repeat("ab", 32),
		Hash:          strings.Repeat("cd", 32),
	}
}

// benchCatalog declares every type and takes payloads already in envelope
// form as they are (the bench builds one normalized payload up front, so the
// emit numbers measure the store, not payload normalization).
type benchCatalog struct{}

func (benchCatalog) Prepare(_ string, payload any) (int, map[string]any, error) {
	if p, ok := payload.(map[string]any); ok {
		return 1, p, nil
	}
	p, err := envelope.NormalizePayload(payload)
	return 1, p, err
}
