package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The event-path section follows one event from Emit to a DURABLE handler
// (test/eventpath: the event store, the stream's record through the Pipe's
// enrichment, the FIFO message through the durable consumer, the claim, the
// orders example's notifications handler) and counts the code it runs: the
// test runs twice with coverage over every non-standard package it links,
// once stopping before the event, and the blocks whose count grew are the
// event's path. Start-up (catalog, wiring) and the test's own stand-ins for
// AWS (internal/localaws, twin) are not counted.

const modulePath = "github.com/fourlanes/fourlanes/"

// pathBaseline is the same measurement at 644b654, the last commit before
// issue 14's work (its test adapted to that commit's API: pkg/example, the
// enrichment's Log field): a fixed historical figure, not re-run here.
var pathBaseline = map[string][3]int{ // group → files, packages, statements
	"fourlanes":   {28, 12, 1353},
	"third-party": {6, 3, 106},
}

func benchEventPath(ctx context.Context, env *benchEnv, o options) (section, error) {
	sec := section{title: "6. One event's path: the code from Emit to a DURABLE handler"}
	if err := env.requireDB(); err != nil {
		return sec, err
	}
	list := exec.CommandContext(ctx, "go", "list", "-deps", "-test", "./test/eventpath/")
	list.Dir = env.root
	out, err := list.Output()
	if err != nil {
		return sec, fmt.Errorf("go list the event path's packages: %w", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		if !strings.Contains(p, ".") || strings.ContainsAny(p, "[ ") || strings.HasSuffix(p, ".test") || strings.HasSuffix(p, "_test") ||
			strings.HasPrefix(p, modulePath+"internal/") || strings.HasPrefix(p, modulePath+"test/") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	dir, err := os.MkdirTemp("", "fourlanes-eventpath-")
	if err != nil {
		return sec, err
	}
	defer os.RemoveAll(dir)
	profile := func(setupOnly string) (map[string]block, error) {
		p := filepath.Join(dir, "setup"+setupOnly+".cov")
		cmd := exec.CommandContext(ctx, "go", "test", "./test/eventpath/", "-count=1", "-run", "^TestOneEventFromEmitToDurableHandler$",
			"-covermode=atomic", "-coverpkg="+strings.Join(pkgs, ","), "-coverprofile="+p)
		cmd.Dir = env.root
		cmd.Env = append(os.Environ(), "FOURLANES_DYNAMODB_ENDPOINT="+env.ddbEndpoint, "FOURLANES_EVENTPATH_SETUP_ONLY="+setupOnly)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go test ./test/eventpath (setup only: %s): %w\n%s", setupOnly, err, tail(string(b), 2000))
		}
		return readProfile(p)
	}
	setup, err := profile("1")
	if err != nil {
		return sec, err
	}
	full, err := profile("0")
	if err != nil {
		return sec, err
	}
	type count struct {
		files, pkgs map[string]bool
		stmts       int
	}
	groups := map[string]*count{}
	for k, b := range full {
		if b.count <= setup[k].count {
			continue
		}
		file := k[:strings.Index(k, ":")]
		g := pathGroup(file)
		if g == "" {
			continue
		}
		c := groups[g]
		if c == nil {
			c = &count{files: map[string]bool{}, pkgs: map[string]bool{}}
			groups[g] = c
		}
		c.files[file] = true
		c.pkgs[filepath.Dir(file)] = true
		c.stmts += b.stmts
	}
	t := &table{head: []string{"code", "files", "packages", "statements run", "at 644b654 (files / packages / statements)"}}
	var all [3]int
	var base [3]int
	for _, g := range []string{"fourlanes", "third-party"} {
		c := groups[g]
		if c == nil {
			c = &count{files: map[string]bool{}, pkgs: map[string]bool{}}
		}
		b := pathBaseline[g]
		t.add(g, strconv.Itoa(len(c.files)), strconv.Itoa(len(c.pkgs)), strconv.Itoa(c.stmts), fmt.Sprintf("%d / %d / %d", b[0], b[1], b[2]))
		all[0], all[1], all[2] = all[0]+len(c.files), all[1]+len(c.pkgs), all[2]+c.stmts
		base[0], base[1], base[2] = base[0]+b[0], base[1]+b[1], base[2]+b[2]
	}
	t.add("**total**", strconv.Itoa(all[0]), strconv.Itoa(all[1]), strconv.Itoa(all[2]), fmt.Sprintf("%d / %d / %d", base[0], base[1], base[2]))
	sec.para("One event of the orders example (`order.placed`) from `Emit` to its DURABLE handler (notifications), in one process " +
		"(test/eventpath): the code it runs, counted from coverage (blocks whose count grew between a run that stops before the event " +
		"and one that delivers it). Start-up and the test's stand-ins for AWS are not counted; the AWS SDK and aws-lambda-go, which " +
		"both commits run alike, are left out of third-party. The right-hand column is the same measurement at 644b654, before issue 14 " +
		"(measured once; not re-run by this bench).")
	sec.table(t)
	for _, g := range []string{"fourlanes", "third-party"} {
		if c := groups[g]; c != nil {
			ps := make([]string, 0, len(c.pkgs))
			for p := range c.pkgs {
				ps = append(ps, "`"+strings.TrimPrefix(p, modulePath)+"`")
			}
			sort.Strings(ps)
			sec.para("%s packages: %s.", g, strings.Join(ps, ", "))
		}
	}
	return sec, nil
}

// block is one coverage block: its statements and how often it ran.
type block struct{ stmts, count int }

// readProfile reads a Go coverage profile, keyed by block ("file:pos").
func readProfile(path string) (map[string]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]block{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 || strings.HasPrefix(fs[0], "mode:") {
			continue
		}
		n, err1 := strconv.Atoi(fs[1])
		c, err2 := strconv.Atoi(fs[2])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad line %q", path, sc.Text())
		}
		b := out[fs[0]]
		out[fs[0]] = block{stmts: n, count: b.count + c}
	}
	return out, sc.Err()
}

// pathGroup is the group a covered file counts in, or "" when it is not
// counted: the test's AWS stand-ins, the AWS SDK and aws-lambda-go.
func pathGroup(file string) string {
	switch {
	case strings.HasPrefix(file, modulePath+"internal/"), strings.HasPrefix(file, modulePath+"test/"):
		return ""
	case strings.HasPrefix(file, modulePath):
		return "fourlanes"
	case strings.HasPrefix(file, "github.com/aws/"), !strings.Contains(strings.SplitN(file, "/", 2)[0], "."):
		return ""
	}
	return "third-party"
}
