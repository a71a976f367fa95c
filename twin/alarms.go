package twin

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The twin evaluates the template's CloudWatch alarms over the metrics its
// functions write (EMF lines on standard output, as CloudWatch Logs turns
// them into metrics) and records what each alarm publishes to its SNS
// topics, so that a test can follow a failure to the topic that pages
// someone. It evaluates when asked (EvaluateAlarms), not on a schedule:
// a test chooses the moment, as it invokes reconcile and dlq-repair.
//
// What it evaluates, from the alarm's own properties:
//   - a metric alarm (MetricName, Namespace, Dimensions, Statistic Sum,
//     Average, Minimum, Maximum or SampleCount, Period);
//   - an alarm on one Metrics Insights query (Metrics, the entry that
//     returns data: SELECT SUM|AVG|MIN|MAX|COUNT(metric) FROM
//     SCHEMA("namespace", dimension, …) [WHERE dimension = 'value' OR …]),
//     which matches the series whose dimension names are exactly the
//     schema's, as CloudWatch does;
//
// with Threshold, ComparisonOperator, EvaluationPeriods, DatapointsToAlarm
// and TreatMissingData. The periods are aligned to multiples of Period; the
// last one is the period holding the evaluation time (CloudWatch evaluates
// a period while it fills). Any other alarm (metric math over several
// metrics, anomaly detection) is reported Unsupported, never evaluated
// wrong. On a change of state it publishes to the topics of AlarmActions
// (ALARM), OKActions (OK) or InsufficientDataActions, as the template
// resolves them (an SNS topic's Ref is its ARN).

// Alarm states.
const (
	AlarmOK               = "OK"
	AlarmAlarm            = "ALARM"
	AlarmInsufficientData = "INSUFFICIENT_DATA"
)

// AlarmState is one alarm after an evaluation.
type AlarmState struct {
	LogicalID string
	Name      string
	State     string // AlarmOK, AlarmAlarm, AlarmInsufficientData; "" when Unsupported
	// Values are the evaluated periods, oldest first (NaN: no data).
	Values []float64
	// Unsupported says why the twin does not evaluate this alarm.
	Unsupported string
}

// Notification is what an alarm published to a topic on a change of state.
type Notification struct {
	Topic     string // the topic's ARN, as the action resolves
	Alarm     string // the alarm's name
	LogicalID string
	OldState  string
	NewState  string
	Reason    string
	At        time.Time
}

// datapoint is one value of one metric series, from an EMF line.
type datapoint struct {
	namespace, metric string
	dims              map[string]string // the series' dimensions (one dimension set of the line)
	value             float64
	at                time.Time
}

// metricStore keeps what the functions' EMF lines recorded, and the alarms'
// states and notifications.
type metricStore struct {
	mu     sync.Mutex
	points []datapoint
	state  map[string]string // alarm logical ID → state
	sent   []Notification
}

// observe records the metrics of one function line, if it is an EMF
// document.
func (m *metricStore) observe(text string) {
	if !strings.HasPrefix(text, `{"_aws"`) {
		return
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &doc) != nil {
		return
	}
	var meta struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	}
	if json.Unmarshal(doc["_aws"], &meta) != nil {
		return
	}
	at := time.UnixMilli(meta.Timestamp)
	str := func(name string) (string, bool) {
		var s string
		err := json.Unmarshal(doc[name], &s)
		return s, err == nil
	}
	var pts []datapoint
	for _, d := range meta.CloudWatchMetrics {
		sets := d.Dimensions
		if len(sets) == 0 {
			sets = [][]string{nil}
		}
		for _, mt := range d.Metrics {
			var values []float64
			var one float64
			if json.Unmarshal(doc[mt.Name], &one) == nil {
				values = []float64{one}
			} else if json.Unmarshal(doc[mt.Name], &values) != nil {
				continue // not a number: CloudWatch drops it too
			}
		sets:
			for _, set := range sets {
				dims := map[string]string{}
				for _, name := range set {
					v, ok := str(name)
					if !ok {
						continue sets // a dimension without a string value: no series
					}
					dims[name] = v
				}
				for _, v := range values {
					pts = append(pts, datapoint{namespace: d.Namespace, metric: mt.Name, dims: dims, value: v, at: at})
				}
			}
		}
	}
	if len(pts) > 0 {
		m.mu.Lock()
		m.points = append(m.points, pts...)
		m.mu.Unlock()
	}
}

// alarmDef is what the evaluation reads of an alarm's properties.
type alarmDef struct {
	id, name                              string
	query                                 *insightsQuery
	threshold                             float64
	op, missing                           string
	periods, toAlarm                      int
	period                                time.Duration
	alarmActions, okActions, insufActions []string
}

// insightsQuery is a Metrics Insights query (or a metric alarm as one).
type insightsQuery struct {
	fn, metric, namespace string
	schema                []string            // dimension names, sorted
	where                 map[string][]string // dimension → values, any of which matches (OR)
	exact                 map[string]string   // a metric alarm's dimensions: all must match
}

var (
	selectRe = regexp.MustCompile(`^SELECT (SUM|AVG|MIN|MAX|COUNT)\((\w+)\) FROM SCHEMA\("([^"]+)"((?:, *\w+)*)\)(?: WHERE (.+))?$`)
	eqRe     = regexp.MustCompile(`^(\w+) = '([^'\\]*)'$`)
)

func parseInsights(q string) (*insightsQuery, error) {
	m := selectRe.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return nil, fmt.Errorf("query %q is not SELECT FUNC(metric) FROM SCHEMA(\"namespace\", dimensions…) [WHERE …]", q)
	}
	iq := &insightsQuery{fn: m[1], metric: m[2], namespace: m[3], where: map[string][]string{}}
	for _, d := range strings.Split(m[4], ",") {
		if d = strings.TrimSpace(d); d != "" {
			iq.schema = append(iq.schema, d)
		}
	}
	slices.Sort(iq.schema)
	if m[5] != "" {
		for _, term := range strings.Split(m[5], " OR ") {
			e := eqRe.FindStringSubmatch(strings.TrimSpace(term))
			if e == nil {
				return nil, fmt.Errorf("query %q: WHERE term %q is not dimension = 'value' (the twin evaluates ORs of those)", q, term)
			}
			iq.where[e[1]] = append(iq.where[e[1]], e[2])
		}
	}
	return iq, nil
}

func (q *insightsQuery) matches(p datapoint) bool {
	if p.namespace != q.namespace || p.metric != q.metric {
		return false
	}
	if q.exact != nil {
		if len(p.dims) != len(q.exact) {
			return false
		}
		for k, v := range q.exact {
			if p.dims[k] != v {
				return false
			}
		}
		return true
	}
	if len(p.dims) != len(q.schema) {
		return false
	}
	for _, d := range q.schema {
		if _, ok := p.dims[d]; !ok {
			return false
		}
	}
	if len(q.where) == 0 {
		return true
	}
	for d, vs := range q.where {
		if slices.Contains(vs, p.dims[d]) {
			return true
		}
	}
	return false
}

func (q *insightsQuery) aggregate(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	switch q.fn {
	case "COUNT":
		return float64(len(vs))
	case "MIN":
		return slices.Min(vs)
	case "MAX":
		return slices.Max(vs)
	}
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	if q.fn == "AVG" {
		return sum / float64(len(vs))
	}
	return sum
}

// alarmDefs reads every alarm of the template; one the twin cannot
// evaluate comes back with the reason.
func (tw *Twin) alarmDefs() ([]alarmDef, map[string]string) {
	var defs []alarmDef
	unsupported := map[string]string{}
	for _, res := range tw.t.OfType("AWS::CloudWatch::Alarm") {
		d, err := tw.alarmDef(res.LogicalID)
		if err != nil {
			unsupported[res.LogicalID] = err.Error()
			continue
		}
		defs = append(defs, d)
	}
	return defs, unsupported
}

func (tw *Twin) alarmDef(id string) (alarmDef, error) {
	var p struct {
		AlarmName                                        string
		MetricName, Namespace, Statistic                 string
		Dimensions                                       []struct{ Name, Value string }
		Period, EvaluationPeriods, DatapointsToAlarm     int
		Threshold                                        *float64
		ComparisonOperator, TreatMissingData             string
		AlarmActions, OKActions, InsufficientDataActions []string
		Metrics                                          []struct {
			Expression string
			Period     int
			ReturnData *bool
			MetricStat any
		}
		ThresholdMetricId, ExtendedStatistic string
	}
	if err := tw.rv.Decode(tw.t.Resources[id], &p); err != nil {
		return alarmDef{}, err
	}
	d := alarmDef{id: id, name: p.AlarmName, op: p.ComparisonOperator, missing: p.TreatMissingData, periods: p.EvaluationPeriods,
		toAlarm: p.DatapointsToAlarm, alarmActions: p.AlarmActions, okActions: p.OKActions, insufActions: p.InsufficientDataActions}
	if d.name == "" {
		d.name, _ = tw.Ref(id)
	}
	if p.Threshold == nil || p.ThresholdMetricId != "" {
		return d, fmt.Errorf("no static Threshold (anomaly detection is not evaluated)")
	}
	d.threshold = *p.Threshold
	if d.periods < 1 {
		return d, fmt.Errorf("EvaluationPeriods %d", d.periods)
	}
	if d.toAlarm == 0 {
		d.toAlarm = d.periods
	}
	period := p.Period
	switch {
	case len(p.Metrics) > 0:
		var ret []int
		for i, m := range p.Metrics {
			if m.ReturnData == nil || *m.ReturnData {
				ret = append(ret, i)
			}
		}
		if len(p.Metrics) != 1 || len(ret) != 1 || p.Metrics[0].Expression == "" {
			return d, fmt.Errorf("metric math over %d queries (the twin evaluates one Metrics Insights query)", len(p.Metrics))
		}
		q, err := parseInsights(p.Metrics[0].Expression)
		if err != nil {
			return d, err
		}
		d.query, period = q, p.Metrics[0].Period
	case p.MetricName != "":
		fn := map[string]string{"Sum": "SUM", "Average": "AVG", "Minimum": "MIN", "Maximum": "MAX", "SampleCount": "COUNT"}[p.Statistic]
		if fn == "" {
			return d, fmt.Errorf("statistic %q (the twin evaluates Sum, Average, Minimum, Maximum, SampleCount)", cmp.Or(p.Statistic, p.ExtendedStatistic))
		}
		d.query = &insightsQuery{fn: fn, metric: p.MetricName, namespace: p.Namespace, exact: map[string]string{}}
		for _, dim := range p.Dimensions {
			d.query.exact[dim.Name] = dim.Value
		}
	default:
		return d, fmt.Errorf("neither a metric nor Metrics")
	}
	if period <= 0 {
		return d, fmt.Errorf("period %d", period)
	}
	d.period = time.Duration(period) * time.Second
	return d, nil
}

func breaches(op string, v, threshold float64) (bool, error) {
	switch op {
	case "GreaterThanOrEqualToThreshold":
		return v >= threshold, nil
	case "GreaterThanThreshold":
		return v > threshold, nil
	case "LessThanThreshold":
		return v < threshold, nil
	case "LessThanOrEqualToThreshold":
		return v <= threshold, nil
	}
	return false, fmt.Errorf("ComparisonOperator %q", op)
}

// evaluate is d's state over the points, at now.
func (d alarmDef) evaluate(points []datapoint, now time.Time) (string, []float64, error) {
	end := now.Truncate(d.period).Add(d.period) // the end of the period holding now
	start := end.Add(-time.Duration(d.periods) * d.period)
	byPeriod := make([][]float64, d.periods)
	for _, p := range points {
		if p.at.Before(start) || !p.at.Before(end) || !d.query.matches(p) {
			continue
		}
		i := int(p.at.Sub(start) / d.period)
		byPeriod[i] = append(byPeriod[i], p.value)
	}
	values := make([]float64, d.periods)
	breaching, missing := 0, 0
	for i, vs := range byPeriod {
		values[i] = d.query.aggregate(vs)
		if math.IsNaN(values[i]) {
			missing++
			if d.missing == "breaching" {
				breaching++
			}
			continue
		}
		b, err := breaches(d.op, values[i], d.threshold)
		if err != nil {
			return "", values, err
		}
		if b {
			breaching++
		}
	}
	switch {
	case breaching >= d.toAlarm:
		return AlarmAlarm, values, nil
	case missing == d.periods && (d.missing == "" || d.missing == "missing"):
		return AlarmInsufficientData, values, nil
	}
	return AlarmOK, values, nil
}

// EvaluateAlarms evaluates every alarm of the template at now over the
// metrics the functions wrote so far, and publishes each change of state
// to the alarm's actions (Notifications). An alarm starts in
// INSUFFICIENT_DATA, as a new one does.
func (tw *Twin) EvaluateAlarms(now time.Time) ([]AlarmState, error) {
	defs, unsupported := tw.alarmDefs()
	m := &tw.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == nil {
		m.state = map[string]string{}
	}
	var out []AlarmState
	for _, d := range defs {
		st, values, err := d.evaluate(m.points, now)
		if err != nil {
			return nil, fmt.Errorf("alarm %s: %w", d.id, err)
		}
		out = append(out, AlarmState{LogicalID: d.id, Name: d.name, State: st, Values: values})
		old := cmp.Or(m.state[d.id], AlarmInsufficientData)
		m.state[d.id] = st
		if old == st {
			continue
		}
		actions := map[string][]string{AlarmAlarm: d.alarmActions, AlarmOK: d.okActions, AlarmInsufficientData: d.insufActions}[st]
		verb := "crossed"
		if st != AlarmAlarm {
			verb = "not crossed"
		}
		reason := fmt.Sprintf("Threshold %s: the last %d datapoints %v (%d breaching needed to alarm); %s %s, TreatMissingData %q",
			verb, d.periods, values, d.toAlarm, d.op, strconv.FormatFloat(d.threshold, 'g', -1, 64), cmp.Or(d.missing, "missing"))
		for _, topic := range actions {
			if !strings.Contains(topic, ":sns:") {
				continue // not a topic (an Auto Scaling or SSM action): nothing the twin delivers
			}
			m.sent = append(m.sent, Notification{Topic: topic, Alarm: d.name, LogicalID: d.id, OldState: old, NewState: st, Reason: reason, At: now})
		}
	}
	for id, why := range unsupported {
		out = append(out, AlarmState{LogicalID: id, Unsupported: why})
	}
	slices.SortFunc(out, func(a, b AlarmState) int { return strings.Compare(a.LogicalID, b.LogicalID) })
	return out, nil
}

// Notifications returns what the alarms published to topic (an ARN, as
// the template's actions resolve it: an SNS topic's Ref), oldest first.
func (tw *Twin) Notifications(topic string) []Notification {
	m := &tw.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Notification
	for _, n := range m.sent {
		if n.Topic == topic {
			out = append(out, n)
		}
	}
	return out
}
