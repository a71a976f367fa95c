package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// The decoding comparison of the delivery section: what a first delivery
// costs when its DURABLE handler does not decode the payload, decodes it by
// hand (envelope.DecodePayload), or is typed (catalog.Typed: the framework
// decodes it once, upcasting a v1 event), side by side on one store, and
// what each decode costs in the process. The module is built at run time,
// as benchRegistry's is (see there).

const benchDecodeType = "benchdecode.placed"

type benchDecodeLine struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// benchDecodeV1 and benchDecodeV2 are shaped like orders.PlacedV1 and V2.
type benchDecodeV1 struct {
	OrderID       string            `json:"order_id"`
	CustomerEmail string            `json:"customer_email"`
	Items         []benchDecodeLine `json:"items"`
	TotalCents    int64             `json:"total_cents"`
}

type benchDecodeV2 struct {
	OrderID       string            `json:"order_id"`
	CustomerEmail string            `json:"customer_email"`
	Items         []benchDecodeLine `json:"items"`
	TotalCents    int64             `json:"total_cents"`
	Currency      string            `json:"currency"`
}

func benchDecodeV2FromV1(p benchDecodeV1) (benchDecodeV2, error) {
	return benchDecodeV2{OrderID: p.OrderID, CustomerEmail: p.CustomerEmail, Items: p.Items, TotalCents: p.TotalCents, Currency: "EUR"}, nil
}

// benchDecoders are the handlers compared; each counts its runs and keeps
// what it read, so the decode cannot be optimized away.
type benchDecoders struct {
	runs  atomic.Int64
	cents atomic.Int64
}

func (h *benchDecoders) none(context.Context, envelope.Envelope) error {
	h.runs.Add(1)
	return nil
}

func (h *benchDecoders) byHand(_ context.Context, e envelope.Envelope) error {
	var p benchDecodeV2
	if err := e.DecodePayload(&p); err != nil {
		return delivery.Permanent(err)
	}
	h.runs.Add(1)
	h.cents.Add(p.TotalCents)
	return nil
}

func (h *benchDecoders) typed(_ context.Context, _ envelope.Envelope, p benchDecodeV2) error {
	h.runs.Add(1)
	h.cents.Add(p.TotalCents)
	return nil
}

// benchDecodeRegistry is one DURABLE subscription of benchDecodeType,
// handled by none, byHand or typed.
func benchDecodeRegistry(kind string, h *benchDecoders) (*catalog.Registry, error) {
	var m catalog.Module[*benchDecoders]
	m.Name = "benchdecode"
	m.Emits = []catalog.EventType{{Name: benchDecodeType, Versions: []catalog.Version{
		catalog.V[benchDecodeV1](1), catalog.V[benchDecodeV2](2, catalog.Upcast(benchDecodeV2FromV1))}}}
	sub := catalog.Subscription[*benchDecoders]{Name: "benchdecode.order-email", Types: benchDecodeType, Lane: catalog.Durable, Reads: []int{1, 2}}
	switch kind {
	case "none":
		sub.Handler = (*benchDecoders).none
	case "hand":
		sub.Handler = (*benchDecoders).byHand
	default:
		sub.Typed = catalog.Typed((*benchDecoders).typed)
	}
	m.Subscribes = []catalog.Subscription[*benchDecoders]{sub}
	cat, err := catalog.New(m.Spec())
	if err != nil {
		return nil, err
	}
	return catalog.NewRegistry(cat, m.Bind(h))
}

// benchDecodeEvents seals n order events of one tenant at schema version v.
func benchDecodeEvents(n, v int, tenant string) ([]envelope.Envelope, error) {
	evs := make([]envelope.Envelope, n)
	prev := chain.Genesis(tenant)
	for i := range evs {
		id, err := envelope.NewID()
		if err != nil {
			return nil, err
		}
		v1 := benchDecodeV1{OrderID: fmt.Sprintf("o-%06d", i), CustomerEmail: "someone@example.com", TotalCents: 28923,
			Items: []benchDecodeLine{{"sku-mug", 2}, {"sku-tea", 1}, {"sku-spoon", 4}}}
		var payload any = v1
		if v == 2 {
			payload, _ = benchDecodeV2FromV1(v1)
		}
		p, err := envelope.NormalizePayload(payload)
		if err != nil {
			return nil, err
		}
		evs[i] = envelope.Envelope{ID: id, Type: benchDecodeType, TenantID: tenant,
			OccurredAt: envelope.FormatTime(time.Now()), SchemaVersion: v, Payload: p, Seq: int64(i + 1), PrevHash: prev}
		if err := chain.Seal(&evs[i]); err != nil {
			return nil, err
		}
		prev = evs[i].Hash
	}
	return evs, nil
}

// decodeComparison adds the comparison to sec: first deliveries of n events
// per variant and round, in batches of 10 with Prefetch (as durable-consumer
// delivers), the variants interleaved round by round so that the machine's
// drift falls on all of them alike.
func decodeComparison(ctx context.Context, sec *section, db delivery.DynamoDB, state string, n, rounds int, log *slog.Logger, metrics *obs.Metrics) error {
	variants := []struct {
		name, kind string
		version    int
	}{
		{"no decoding (the handler only counts)", "none", 2},
		{"untyped, decodes by hand (`envelope.DecodePayload`)", "hand", 2},
		{"typed (`catalog.Typed`), v2 event", "typed", 2},
		{"typed, v1 event upcast to v2 (`catalog.Upcast`)", "typed", 1},
	}
	perEvent := make([][]float64, len(variants)) // ms per event, one per round
	for round := range rounds {
		for vi, v := range variants {
			h := &benchDecoders{}
			reg, err := benchDecodeRegistry(v.kind, h)
			if err != nil {
				return err
			}
			batched, err := delivery.NewBatchedStore(delivery.NewDynamoStore(db, state))
			if err != nil {
				return err
			}
			d, err := delivery.New(reg, delivery.Config{Store: batched, Logger: log, Metrics: metrics})
			if err != nil {
				return err
			}
			evs, err := benchDecodeEvents(n, v.version, fmt.Sprintf("decode-%d-%d", round, vi))
			if err != nil {
				return err
			}
			begin := time.Now()
			for i := 0; i < len(evs); i += 10 {
				batch := evs[i:min(i+10, len(evs))]
				pre, _, err := d.Prefetch(ctx, batch)
				if err != nil {
					return err
				}
				for _, e := range batch {
					res, err := d.DeliverWith(ctx, e, pre)
					if err != nil {
						return err
					}
					if len(res.Subscriptions) != 1 || res.Subscriptions[0].Outcome != delivery.Completed {
						return fmt.Errorf("%s: delivery %+v, want completed", v.name, res.Subscriptions)
					}
				}
			}
			perEvent[vi] = append(perEvent[vi], float64(time.Since(begin).Microseconds())/1000/float64(n))
			if h.runs.Load() != int64(n) {
				return fmt.Errorf("%s: %d handler runs, want %d", v.name, h.runs.Load(), n)
			}
		}
	}

	// The decode alone, in the process: the part of a delivery that differs.
	v2, err := benchDecodeEvents(1, 2, "decode-cpu")
	if err != nil {
		return err
	}
	v1, err := benchDecodeEvents(1, 1, "decode-cpu")
	if err != nil {
		return err
	}
	reg, err := benchDecodeRegistry("typed", &benchDecoders{})
	if err != nil {
		return err
	}
	takes, _ := reg.Subscription("benchdecode.order-email")
	cpu := []struct {
		name string
		f    func() error
	}{
		{"–", nil},
		{"`envelope.DecodePayload` into the v2 struct", func() error {
			var p benchDecodeV2
			return v2[0].DecodePayload(&p)
		}},
		{"`Catalog.DecodeAs` v2 (what the typed handler's wrapper runs)", func() error {
			_, err := reg.Catalog().DecodeAs(v2[0], takes.Takes)
			return err
		}},
		{"`Catalog.DecodeAs` v1 → v2", func() error {
			_, err := reg.Catalog().DecodeAs(v1[0], takes.Takes)
			return err
		}},
	}
	strict := testing.Benchmark(func(b *testing.B) { // the reader before issue 21, for reference
		for range b.N {
			raw, _ := json.Marshal(v2[0].Payload)
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			var p benchDecodeV2
			if err := dec.Decode(&p); err != nil {
				b.Fatal(err)
			}
		}
	})

	t := &table{head: []string{"handler", "events / round", "rounds", "first delivery, ms / event (median of rounds)", "min – max of rounds", "its decode alone (µs / event, in process)"}}
	medians := make([]float64, len(variants))
	decodeUS := make([]float64, len(variants))
	for vi, v := range variants {
		medians[vi] = median(perEvent[vi])
		lo, hi := minMax(perEvent[vi])
		dec := "–"
		if f := cpu[vi].f; f != nil {
			if err := f(); err != nil {
				return fmt.Errorf("%s: %w", cpu[vi].name, err)
			}
			r := testing.Benchmark(func(b *testing.B) {
				for range b.N {
					if err := f(); err != nil {
						b.Fatal(err)
					}
				}
			})
			decodeUS[vi] = float64(r.NsPerOp()) / 1000
			dec = fmt.Sprintf("%.1f (%s)", decodeUS[vi], cpu[vi].name)
		}
		t.add(v.name, fmt.Sprint(n), fmt.Sprint(rounds), f2(medians[vi]), f2(lo)+" – "+f2(hi), dec)
	}
	sec.para("**Typed decoding and first delivery.** One DURABLE subscription per event, %d order events (3 lines, an "+
		"email, a total: shaped like `orders.PlacedV2`) per variant and round, first-delivered in batches of 10 "+
		"(`Prefetch` + `DeliverWith`) over the same state table; the variants take turns in each of %d rounds. The "+
		"handlers differ only in how they get the payload. *Its decode alone* is the same decode timed in the process "+
		"(`testing.Benchmark`); for reference, the reader before issue 21 (a JSON round trip refusing unknown members, "+
		"and no check of required fields) took %.1f µs for the same payload.", n, rounds, float64(strict.NsPerOp())/1000)
	sec.table(t)
	base := medians[0]
	worst := slices.Max(decodeUS[2:])
	ok := worst/1000 < 0.01*base
	sec.para("Target (issue 21): typed decoding does not slow a first delivery — %s: the typed handler's decode (%.1f µs, "+
		"%.1f µs with an upcast) is %.2f %% of a first delivery without decoding (%.2f ms), against %.1f µs decoding "+
		"by hand; the medians of the rounds (%s ms untyped, %s ms typed) differ by the machine's noise, shown by the "+
		"min – max column.", verdict(ok), decodeUS[2], decodeUS[3], 100*worst/1000/base, base, decodeUS[1], f2(medians[1]), f2(medians[2]))
	return nil
}
