package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log"
	"runtime"
	"syscall"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// libraryCanonical is how CanonicalBytes worked before the direct encoder:
// encoding/json, then the JCS library re-parses and re-serializes.
func libraryCanonical(e *envelope.Envelope) ([]byte, error) {
	c := *e
	c.Hash = ""
	raw, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// verifyWith repeats chain.Verifier.Next's checks (tenant, seq, well-formed,
// link, hash) and the head check with canon as the canonicalizer, so the old
// library path can be timed beside the current one.
func verifyWith(canon func(*envelope.Envelope) ([]byte, error), tenant string, evs []envelope.Envelope, head *chain.Head) error {
	prev := chain.Genesis(tenant)
	for i := range evs {
		e := &evs[i]
		if e.TenantID != tenant || e.Seq != int64(i+1) {
			return fmt.Errorf("seq %d: wrong tenant or seq", e.Seq)
		}
		if err := e.ValidateStored(); err != nil {
			return err
		}
		if e.PrevHash != prev {
			return fmt.Errorf("seq %d: prev_hash mismatch", e.Seq)
		}
		b, err := canon(e)
		if err != nil {
			return err
		}
		h, err := chain.HashCanonical(e.PrevHash, b)
		if err != nil {
			return err
		}
		if h != e.Hash {
			return fmt.Errorf("seq %d: hash mismatch", e.Seq)
		}
		prev = e.Hash
	}
	if head.LastSeq != int64(len(evs)) || head.LastHash != prev {
		return fmt.Errorf("head mismatch")
	}
	return nil
}

// buildChain seals n distinct order events of one tenant.
func buildChain(n, note int) ([]envelope.Envelope, *chain.Head, error) {
	evs := make([]envelope.Envelope, n)
	prev := chain.Genesis(benchTenant)
	t0 := time.Date(2026, 11, 29, 19, 45, 0, 0, time.UTC)
	for i := range evs {
		id, err := envelope.NewID()
		if err != nil {
			return nil, nil, err
		}
		evs[i] = envelope.Envelope{
			ID: id, Type: "order.placed", TenantID: benchTenant,
			OccurredAt:    envelope.FormatTime(t0.Add(time.Duration(i) * 1234567 * time.Nanosecond)),
			SchemaVersion: 1, ActorID: "user-7", CorrelationID: fmt.Sprintf("corr-%d", i/10),
			Payload: orderPayload(i, note), Seq: int64(i + 1), PrevHash: prev,
		}
		if err := chain.Seal(&evs[i]); err != nil {
			return nil, nil, err
		}
		prev = evs[i].Hash
	}
	return evs, &chain.Head{TenantID: benchTenant, LastSeq: int64(n), LastHash: prev}, nil
}

// cpuTime is the CPU time this process has used (all threads, GC included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type verifyVariant struct {
	name string
	note string
	run  func() error // one pass over every event
}

func benchVerify(o options) (section, error) {
	sec := section{title: "2. Chain verification vs raw SHA-256 (CPU)"}
	note, _ := sizedEvent()
	evs, head, err := buildChain(o.verifyN, note)
	if err != nil {
		return sec, err
	}
	canon := make([][]byte, len(evs))
	var total int64
	for i := range evs {
		if canon[i], err = evs[i].CanonicalBytes(); err != nil {
			return sec, err
		}
		lib, err := libraryCanonical(&evs[i])
		if err != nil {
			return sec, err
		}
		if string(lib) != string(canon[i]) {
			return sec, fmt.Errorf("event %d: the direct encoder and the library disagree", i+1)
		}
		total += int64(len(canon[i]))
	}
	avg := float64(total) / float64(len(evs))

	// The same chain as an export: canonical lines (as WriteExport and
	// `fourlanes export` write them), and the same events in encoding/json's
	// member order, which no verifier can hash in place.
	var canonExport, decodedExport bytes.Buffer
	if err := chain.WriteExport(&canonExport, chain.Export{Events: evs, Head: head}); err != nil {
		return sec, err
	}
	for i := range evs {
		b, err := json.Marshal(&evs[i])
		if err != nil {
			return sec, err
		}
		decodedExport.Write(append(b, '\n'))
	}
	hb, err := json.Marshal(map[string]*chain.Head{"head": head})
	if err != nil {
		return sec, err
	}
	decodedExport.Write(append(hb, '\n'))
	lines := bytes.Split(bytes.TrimSpace(canonExport.Bytes()), []byte("\n"))
	lines = lines[:len(evs)] // the event lines
	verifyExport := func(data []byte, wantInPlace int64) func() error {
		return func() error {
			sum, err := chain.VerifyExport(bytes.NewReader(data), benchTenant)
			if err != nil {
				return err
			}
			if sum.Events != int64(len(evs)) || sum.InPlace != wantInPlace {
				return fmt.Errorf("verified %d events, %d in place; want %d and %d", sum.Events, sum.InPlace, len(evs), wantInPlace)
			}
			return nil
		}
	}

	rows := make([]envelope.Item, len(evs))
	for i := range evs {
		if rows[i], err = evs[i].ToItem(); err != nil {
			return sec, err
		}
	}

	var sink [32]byte
	variants := []verifyVariant{
		{"raw SHA-256 over the canonical bytes", "`sha256.Sum256(canonical)` per event: the ceiling", func() error {
			for _, b := range canon {
				sink = sha256.Sum256(b)
			}
			return nil
		}},
		{"**`chain.VerifyExport`, canonical lines**", "the whole verification of an export as `fourlanes export` writes it (in memory): line splitting, every check of SPEC.md §6 and the head; each line checked canonical and hashed in place", verifyExport(canonExport.Bytes(), int64(len(evs)))},
		{"**`chain.Verify`** (decoded events, direct encoder)", "the whole verification of events already decoded into `envelope.Envelope` (what reconcile does after reading DynamoDB): every check of SPEC.md §6, validation included, and the head", func() error {
			return chain.Verify(benchTenant, evs, head)
		}},
		{"`chain.VerifyExport`, lines not canonical", "the same export in encoding/json's member order: every line decoded (`envelope.FromJSON`), validated and re-encoded", verifyExport(decodedExport.Bytes(), 0)},
		{"`envelope.ScanCanonical` only", "breakdown of the in-place path: the canonical-form and field checks per line, no hashing", func() error {
			for _, l := range lines {
				if _, ok := envelope.ScanCanonical(l); !ok {
					return fmt.Errorf("line not canonical: %.80s", l)
				}
			}
			return nil
		}},
		{"hash rule only, direct encoder", "`chain.Hash` per event (canonical bytes + SHA-256 + hex) and compare", func() error {
			for i := range evs {
				h, err := chain.Hash(&evs[i])
				if err != nil || h != evs[i].Hash {
					return fmt.Errorf("seq %d: %v", evs[i].Seq, err)
				}
			}
			return nil
		}},
		{"`CanonicalBytes` only, direct encoder", "breakdown", func() error {
			for i := range evs {
				if _, err := evs[i].CanonicalBytes(); err != nil {
					return err
				}
			}
			return nil
		}},
		{"`ValidateStored` only", "breakdown: the well-formedness check Verify makes per event", func() error {
			for i := range evs {
				if err := evs[i].ValidateStored(); err != nil {
					return err
				}
			}
			return nil
		}},
		{"Verify with the library canonicalizer (before)", "the same checks, canonical bytes by `json.Marshal` + `jcs.Transform`", func() error {
			return verifyWith(libraryCanonical, benchTenant, evs, head)
		}},
		{"hash rule only, library canonicalizer (before)", "`json.Marshal` + `jcs.Transform` + SHA-256 per event", func() error {
			for i := range evs {
				b, err := libraryCanonical(&evs[i])
				if err != nil {
					return err
				}
				if h, err := chain.HashCanonical(evs[i].PrevHash, b); err != nil || h != evs[i].Hash {
					return fmt.Errorf("seq %d: %v", evs[i].Seq, err)
				}
			}
			return nil
		}},
		{"**reconcile in place: `Verifier.NextItem` over event rows**", "what reconcile now does with each page of rows DynamoDB returned (the SDK's `map[string]types.AttributeValue`): the canonical line written straight from the attributes (`envelope.AppendItemLine`: canonical by construction, each field checked as it is written, no second scan), hashed in place; every check of SPEC.md §6 and the head", func() error {
			v := chain.NewVerifier(benchTenant)
			for i := range rows {
				handled, err := v.NextItem(rows[i])
				if err != nil {
					return err
				}
				if !handled {
					return fmt.Errorf("seq %d: row not verified in place", i+1)
				}
			}
			return v.Head(head)
		}},
		{"reconcile before: `FromItem` + `Verifier.Next`", "what reconcile did with the same rows: decode each into an `Envelope` (payload as `map[string]any`), validate, re-encode and hash", func() error {
			v := chain.NewVerifier(benchTenant)
			for i := range rows {
				e, err := envelope.FromItem(rows[i])
				if err != nil {
					return err
				}
				if err := v.Next(&e); err != nil {
					return err
				}
			}
			return v.Head(head)
		}},
	}
	for _, v := range variants { // every variant must agree the chain is intact
		if err := v.run(); err != nil {
			return sec, fmt.Errorf("%s: %w", v.name, err)
		}
	}

	// Rounds: every variant once per round, in a rotating order; each runs
	// whole passes for at least minDur. Throughput is over CPU time (the
	// process's, GC included), so time the scheduler gave to other work on
	// this shared machine does not count; wall time is shown too.
	minDur := 250 * time.Millisecond
	if o.verifyReps <= 2 {
		minDur = 20 * time.Millisecond
	}
	cpuRate := make([][]float64, len(variants))  // events per CPU second, per round
	wallRate := make([][]float64, len(variants)) // events per wall second
	vsSHA := make([][]float64, len(variants))    // ÷ SHA-256 in the same round
	for round := range o.verifyReps {
		got := make([]float64, len(variants))
		for k := range variants {
			i := (k + round) % len(variants)
			runtime.GC()
			passes := 0
			w0, c0 := time.Now(), cpuTime()
			for passes < 10000 && (passes == 0 || time.Since(w0) < minDur) {
				if err := variants[i].run(); err != nil {
					return sec, err
				}
				passes++
			}
			wall, cpu := time.Since(w0), cpuTime()-c0
			n := float64(passes * len(evs))
			got[i] = n / cpu.Seconds()
			cpuRate[i] = append(cpuRate[i], got[i])
			wallRate[i] = append(wallRate[i], n/wall.Seconds())
		}
		for i := range variants {
			vsSHA[i] = append(vsSHA[i], got[i]/got[0])
		}
	}
	_ = sink

	sec.para("A chain of %d distinct order events of one tenant (the emit bench's payload shape; canonical bytes %.0f bytes "+
		"on average), held in memory. %d rounds; in each, every variant runs whole passes over the chain for ≥ %s, in a "+
		"rotating order. Rates are the median over rounds of events per **CPU second** (the process's user+system time, "+
		"GC included); \"÷ SHA-256\" is the median over rounds of the ratio to the raw SHA-256 row measured in the same round. "+
		"MB/s counts the canonical bytes (the same bytes for every row).", len(evs), avg, o.verifyReps, minDur)
	t := &table{head: []string{"variant", "events/s (CPU)", "MB/s (CPU)", "÷ raw SHA-256 (median; min – max)", "events/s (wall)", "what it is"}}
	for i, v := range variants {
		lo, hi := minMax(vsSHA[i])
		t.add(v.name, f0(median(cpuRate[i])), f1(median(cpuRate[i])*avg/1e6),
			pct(median(vsSHA[i]))+" ("+pct(lo)+" – "+pct(hi)+")", f0(median(wallRate[i])), v.note)
	}
	sec.table(t)
	export, decoded, decodedLines := median(vsSHA[1]), median(vsSHA[2]), median(vsSHA[3])
	speedup := median(cpuRate[2]) / median(cpuRate[8])
	sec.para("Target (issue 7): chain verification CPU throughput ≥ 50 %% of raw SHA-256 over the same canonical bytes — "+
		"verifying an export, `chain.VerifyExport` over canonical lines, reaches %s: %s. "+
		"Verifying events already decoded into Go values (`chain.Verify`) reaches %s: re-encoding a map-based envelope "+
		"costs several times the hash, which is why exports keep each event's canonical bytes verbatim in its line "+
		"(see pkg/chain/SPEC.md §5). An export whose lines are not canonical verifies at %s. "+
		"`chain.Verify` is %.1f× faster than with the library canonicalizer.",
		pct(export), verdict(export >= 0.5), pct(decoded), pct(decodedLines), speedup)
	inPlace, before := median(vsSHA[10]), median(vsSHA[11])
	sec.para("Targets (issue 23), one core, ÷ raw SHA-256 over the same canonical bytes: verifying an export in one pass ≥ 50 %% — "+
		"`chain.VerifyExport` reaches %s: %s; reconcile verifying the stored rows in place ≥ 35 %% — `Verifier.NextItem` over the "+
		"rows reaches %s: %s (decoding them first, as reconcile did, %s).",
		pct(export), verdict(export >= 0.5), pct(inPlace), verdict(inPlace >= 0.35), pct(before))
	log.Printf("verify: VerifyExport (canonical lines) %s of SHA-256, chain.Verify %s, rows in place %s (decoding %s)", pct(export), pct(decoded), pct(inPlace), pct(before))
	return sec, nil
}
