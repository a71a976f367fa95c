package obs

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Limits of the CloudWatch embedded metric format (EMF) specification
// (docs: CloudWatch_Embedded_Metric_Format_Specification).
const (
	// maxMetrics: a directive's Metrics holds at most 100 definitions; a
	// document here holds at most 100 metrics in all its directives.
	maxMetrics = 100
	// maxValues: a metric's value may be an array of at most 100 numbers.
	maxValues = 100
	// maxDimensions: a dimension set names at most 30 keys.
	maxDimensions = 30
)

// ServiceDimension is the dimension PerInvocation adds, as a dimension set of
// its own, to every metric: the Lambda function's name.
const ServiceDimension = "Service"

// EMF units this package writes (CloudWatch MetricDatum units).
const (
	unitCount        = "Count"
	unitMilliseconds = "Milliseconds"
)

// Metrics writes CloudWatch metrics as EMF documents, one JSON line each, in
// keys.MetricNamespace. By default each Count writes its document at once;
// PerInvocation makes a Lambda function write one flush per invocation.
//
// The zero value writes to stdout. A nil *Metrics is valid too, so components
// work without wiring: it writes through one process-wide Metrics on stdout
// (the one PerInvocation(nil, …) buffers).
type Metrics struct {
	mu sync.Mutex
	w  io.Writer
	// service is the value of the Service dimension set ("": none).
	service string
	// inflight counts invocations under way (PerInvocation); while it is
	// above zero, counts wait in pending.
	inflight int
	pending  []*series
	index    map[string]*series // series key → its entry in pending
}

// stdout is what a nil *Metrics writes through.
var stdout Metrics

// NewMetrics writes EMF lines to w (stdout when nil).
func NewMetrics(w io.Writer) *Metrics { return &Metrics{w: w} }

func (m *Metrics) or() *Metrics {
	if m == nil {
		return &stdout
	}
	return m
}

// Count records n (unit Count) as the metric name with the dimensions dims,
// given as key, value pairs ("Lane", "DURABLE", …).
//
// A dims list EMF cannot express is a programming error. It is reported once
// per metric name and problem on slog's default logger at ERROR, and repaired
// by a fixed rule so the count is not lost: an unpaired last key is dropped,
// as is a pair with an empty key, a key named like the metric, or a key
// given again (the first value stays); pairs beyond the 30th are dropped. A
// metric without a name is reported and not written.
func (m *Metrics) Count(name string, n int, dims ...string) {
	m.or().put(name, unitCount, int64(n), dims)
}

// Milliseconds records d in milliseconds (unit Milliseconds) as the metric
// name, with dimensions as for Count.
func (m *Metrics) Milliseconds(name string, d time.Duration, dims ...string) {
	m.or().put(name, unitMilliseconds, d.Milliseconds(), dims)
}

func (m *Metrics) put(name, unit string, v int64, dims []string) {
	if name == "" {
		reportOnce(name, "a metric needs a name; not written", dims)
		return
	}
	ds := pairs(name, dims)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inflight == 0 {
		m.write([]*series{{name: name, unit: unit, dims: ds, values: []int64{v}}})
		return
	}
	k := seriesKey(name, ds)
	if s := m.index[k]; s != nil {
		s.values = append(s.values, v)
		return
	}
	s := &series{name: name, unit: unit, dims: ds, values: []int64{v}}
	if m.index == nil {
		m.index = map[string]*series{}
	}
	m.index[k] = s
	m.pending = append(m.pending, s)
}

// flush writes what is pending.
func (m *Metrics) flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushLocked()
}

func (m *Metrics) flushLocked() {
	if len(m.pending) == 0 {
		return
	}
	m.write(m.pending)
	m.pending, m.index = nil, nil
}

// write encodes ss into as few documents as fit and writes each as one line.
func (m *Metrics) write(ss []*series) {
	w := m.w
	if w == nil {
		w = os.Stdout
	}
	now := time.Now().UnixMilli()
	var buf bytes.Buffer
	for _, d := range pack(ss, m.service) {
		buf.Reset()
		d.encode(&buf, now, keys.MetricNamespace, m.service)
		_, _ = w.Write(buf.Bytes()) // stdout: nowhere to report a failure
	}
}

type dimension struct{ key, value string }

// series is one metric identity (name and dimensions) and its values.
type series struct {
	name, unit string
	dims       []dimension
	values     []int64
}

// seriesKey identifies a series whatever the order its dimensions were given in.
func seriesKey(name string, ds []dimension) string {
	ks := make([]string, 0, len(ds))
	for _, d := range ds {
		ks = append(ks, d.key+"\x00"+d.value)
	}
	slices.Sort(ks)
	return name + "\x01" + strings.Join(ks, "\x01")
}

// pairs turns dims into dimensions by Count's rule.
func pairs(name string, dims []string) []dimension {
	if len(dims)%2 == 1 {
		reportOnce(name, "odd dims list: the last key, which has no value, is dropped", dims)
		dims = dims[:len(dims)-1]
	}
	ds := make([]dimension, 0, len(dims)/2)
	for i := 0; i < len(dims); i += 2 {
		k, v := dims[i], dims[i+1]
		switch {
		case k == "" || k == name:
			reportOnce(name, "a dimension key is empty or the metric's own name: the pair is dropped", dims)
		case slices.ContainsFunc(ds, func(d dimension) bool { return d.key == k }):
			reportOnce(name, "a dimension key is given twice: its first value stays", dims)
		case len(ds) == maxDimensions:
			reportOnce(name, "more than 30 dimensions: the pairs beyond the 30th are dropped", dims)
		default:
			ds = append(ds, dimension{k, v})
		}
	}
	return ds
}

var reported sync.Map // metric name + problem → reported once

func reportOnce(name, problem string, dims []string) {
	if _, dup := reported.LoadOrStore(name+"\x00"+problem, true); dup {
		return
	}
	slog.Error("obs: invalid metric: "+problem, slog.String(KeyMetric, name), slog.Any(KeyDims, dims))
}

// document is one EMF document: metrics whose dimension values agree
// (dimension values are root members, one per key), each name once.
type document struct {
	members map[string]string // dimension key → value
	keys    []string          // members' keys in first-use order
	names   map[string]bool
	series  []*series
}

// withService is what s adds to a document: its own dimensions, and the Service
// dimension unless s names a Service of its own.
func withService(s *series, service string) []dimension {
	if service == "" || slices.ContainsFunc(s.dims, func(d dimension) bool { return d.key == ServiceDimension }) {
		return s.dims
	}
	return append(slices.Clip(s.dims), dimension{ServiceDimension, service})
}

func (d *document) fits(s *series, service string) bool {
	if len(d.series) == maxMetrics || d.names[s.name] {
		return false
	}
	if _, clash := d.members[s.name]; clash {
		return false
	}
	for _, dm := range withService(s, service) {
		if v, ok := d.members[dm.key]; (ok && v != dm.value) || d.names[dm.key] {
			return false
		}
	}
	return true
}

func (d *document) add(s *series, service string) {
	for _, dm := range withService(s, service) {
		if _, ok := d.members[dm.key]; !ok {
			d.members[dm.key] = dm.value
			d.keys = append(d.keys, dm.key)
		}
	}
	d.names[s.name] = true
	d.series = append(d.series, s)
}

// pack places each series, split into runs of at most 100 values, in the
// first document it fits (first fit keeps the documents few and the order
// of the counts).
func pack(ss []*series, service string) []*document {
	var docs []*document
	for _, s := range ss {
		for vs := range slices.Chunk(s.values, maxValues) {
			part := &series{name: s.name, unit: s.unit, dims: s.dims, values: vs}
			i := slices.IndexFunc(docs, func(d *document) bool { return d.fits(part, service) })
			if i < 0 {
				docs = append(docs, &document{members: map[string]string{}, names: map[string]bool{}})
				i = len(docs) - 1
			}
			docs[i].add(part, service)
		}
	}
	return docs
}

// encode writes the document as one JSON line: _aws (Timestamp in ms since
// the epoch, one MetricDirective per distinct list of dimension sets), then
// the dimension values, then the metric values (a number, or an array when
// the invocation counted the metric more than once).
func (d *document) encode(buf *bytes.Buffer, ms int64, namespace, service string) {
	type directive struct {
		sets    [][]string
		metrics []*series
	}
	var dirs []*directive
	byShape := map[string]*directive{}
	for _, s := range d.series {
		own := make([]string, 0, len(s.dims))
		for _, dm := range s.dims {
			own = append(own, dm.key)
		}
		sets := [][]string{own}
		if ds := withService(s, service); len(ds) > len(s.dims) {
			sets = append(sets, []string{ServiceDimension})
		}
		shape, _ := json.Marshal(sets)
		dr := byShape[string(shape)]
		if dr == nil {
			dr = &directive{sets: sets}
			byShape[string(shape)] = dr
			dirs = append(dirs, dr)
		}
		dr.metrics = append(dr.metrics, s)
	}

	buf.WriteString(`{"_aws":{"Timestamp":`)
	buf.WriteString(strconv.FormatInt(ms, 10))
	buf.WriteString(`,"CloudWatchMetrics":[`)
	for i, dr := range dirs {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"Namespace":`)
		str(buf, namespace)
		buf.WriteString(`,"Dimensions":`)
		sets, _ := json.Marshal(dr.sets)
		buf.Write(sets)
		buf.WriteString(`,"Metrics":[`)
		for j, s := range dr.metrics {
			if j > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(`{"Name":`)
			str(buf, s.name)
			buf.WriteString(`,"Unit":`)
			str(buf, s.unit)
			buf.WriteByte('}')
		}
		buf.WriteString(`]}`)
	}
	buf.WriteString(`]}`)
	for _, k := range d.keys {
		buf.WriteByte(',')
		str(buf, k)
		buf.WriteByte(':')
		str(buf, d.members[k])
	}
	for _, s := range d.series {
		buf.WriteByte(',')
		str(buf, s.name)
		buf.WriteByte(':')
		if len(s.values) == 1 {
			buf.WriteString(strconv.FormatInt(s.values[0], 10))
			continue
		}
		buf.WriteByte('[')
		for i, v := range s.values {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(strconv.FormatInt(v, 10))
		}
		buf.WriteByte(']')
	}
	buf.WriteString("}\n")
}

func str(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}
