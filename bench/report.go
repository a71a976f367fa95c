package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// section is one part of the results: a title and markdown paragraphs and
// tables, in order.
type section struct {
	title string
	body  []string
	took  time.Duration
}

func (s *section) para(format string, args ...any) {
	s.body = append(s.body, fmt.Sprintf(format, args...))
}
func (s *section) table(t *table) { s.body = append(s.body, t.markdown()) }

func (s section) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", s.title)
	for _, p := range s.body {
		b.WriteString(strings.TrimRight(p, "\n"))
		b.WriteString("\n\n")
	}
	if s.took > 0 {
		fmt.Fprintf(&b, "_Section wall time: %s._\n", s.took.Round(time.Second))
	}
	return b.String()
}

type report struct {
	quick    bool
	machine  machine
	sections []section
}

func (r *report) markdown() string {
	var b strings.Builder
	b.WriteString("# fourlanes benchmark results\n\n")
	b.WriteString("Written by `make bench` (`go run ./bench`, see bench/main.go); do not edit by hand — rerun it.\n")
	b.WriteString("Every comparison in a table was measured in this one run, interleaved, on the machine below.\n")
	b.WriteString("The machine is shared with other work: absolute numbers move from run to run, the ratios much less.\n\n")
	if r.quick {
		b.WriteString("> **Quick smoke run (`-quick`): the numbers below are not meaningful.**\n\n")
	}
	b.WriteString("## Machine\n\n")
	t := &table{head: []string{"", ""}}
	m := r.machine
	t.add("date", m.date)
	t.add("commit measured", m.commit)
	t.add("CPU", m.cpu)
	t.add("cores (runtime.NumCPU)", fmt.Sprint(m.cores))
	t.add("Go", m.goVersion)
	t.add("DynamoDB", m.dynamoDB)
	t.add("load average at start → end (1, 5, 15 min)", m.loadStart+" → "+m.loadEnd)
	b.WriteString(t.markdown())
	b.WriteString("\n")
	for _, s := range r.sections {
		b.WriteString(s.markdown())
		b.WriteString("\n")
	}
	return b.String()
}

// spliceInto returns old, a results file, with r's sections in place of
// those of the same title (appended when old has none). Each spliced section
// says when and on which commit it was measured, since old's machine table
// is of another run.
func (r *report) spliceInto(old string) string {
	for _, s := range r.sections {
		m := r.machine
		s.body = append(s.body, fmt.Sprintf("_Measured alone (`-only`) on %s at commit %s, load %s → %s; the machine table above is of the last full run._",
			m.date, m.commit, m.loadStart, m.loadEnd))
		head := "## " + s.title + "\n"
		i := strings.Index(old, head)
		if i < 0 {
			old = strings.TrimRight(old, "\n") + "\n\n" + s.markdown()
			continue
		}
		end := len(old)
		if j := strings.Index(old[i+len(head):], "\n## "); j >= 0 {
			end = i + len(head) + j + 1
		}
		old = old[:i] + s.markdown() + "\n" + old[end:]
	}
	return old
}

type machine struct {
	date, commit, cpu, goVersion, dynamoDB, loadStart, loadEnd string
	cores                                                      int
}

func describeMachine(root string) machine {
	m := machine{
		date:      time.Now().UTC().Format("2006-01-02 15:04 MST"),
		cpu:       cpuModel(),
		cores:     runtime.NumCPU(),
		goVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		commit:    commitMeasured(root),
		dynamoDB:  dynamoDBRevision(root),
		loadStart: loadAverage(),
	}
	if hasCPUFlag("sha_ni") {
		m.cpu += " (SHA extensions: yes)"
	}
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown (" + runtime.GOARCH + ")"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown (" + runtime.GOARCH + ")"
}

func hasCPUFlag(flag string) bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			return slices.Contains(strings.Fields(v), flag)
		}
	}
	return false
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// commitMeasured names the commit whose code the run measured, marked when
// the tree had uncommitted changes (then the figures are of no commit).
func commitMeasured(root string) string {
	rev, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	out := strings.TrimSpace(string(rev))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		out += " with uncommitted changes (the figures are of no commit)"
	}
	return out
}

// dynamoDBRevision names the DynamoDB the run measured: the project's own server
// (twin/ddb) at the repository's git revision, marked when its files have
// uncommitted changes. `make bench` builds that server from this same tree.
func dynamoDBRevision(root string) string {
	rev, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "twin/ddb (git revision unknown)"
	}
	out := "twin/ddb at git " + strings.TrimSpace(string(rev))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", "twin/ddb").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		out += " (with uncommitted changes)"
	}
	return out
}

// table is a markdown table.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) markdown() string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	line(t.head)
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}

// Number formatting for the tables.

func f0(x float64) string { return fmt.Sprintf("%.0f", x) }
func f1(x float64) string { return fmt.Sprintf("%.1f", x) }
func f2(x float64) string { return fmt.Sprintf("%.2f", x) }

func ratio(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", x)
}

func pct(x float64) string { return fmt.Sprintf("%.0f %%", 100*x) }

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

// Statistics.

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func medianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

// percentile is the nearest-rank percentile of ds (p in 0..100).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(rank, len(s)-1))]
}

func minMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}
