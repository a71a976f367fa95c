// Package docs checks the repository's documentation against the tree: a
// dead link or a path it names that does not exist fails the build.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/twin/localaws"
)

// pages are the documentation a newcomer reads.
func pages(t *testing.T, root string) []string {
	t.Helper()
	out := []string{filepath.Join(root, "README.md"), filepath.Join(root, "DESIGN-NOTES.md"), filepath.Join(root, "pkg", "chain", "SPEC.md")}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) < 8 {
		t.Fatalf("docs/*.md: %d pages, %v; want the reference pages", len(docs), err)
	}
	return append(out, docs...)
}

var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fenceRe   = regexp.MustCompile("(?ms)^```.*?^```")
	codeRe    = regexp.MustCompile("`([^`\\s]+)`")
	headingRe = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	// A repository path as the docs name one: a top-level folder of the
	// tree, then a path without placeholders.
	repoPathRe = regexp.MustCompile(`^(pkg|examples|twin|infra|cmd|test|bench|docs|scripts|internal)/[A-Za-z0-9_./-]*$`)
)

// slug is GitHub's anchor for a heading.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		case r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range headingRe.FindAllStringSubmatch(string(b), -1) {
		out[slug(strings.ReplaceAll(m[1], "`", ""))] = true
	}
	return out
}

// TestLinksResolve: every relative link of the documentation names a file
// that exists, and its #anchor a heading of that file.
func TestLinksResolve(t *testing.T) {
	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	for _, page := range pages(t, root) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		// Code is not prose: catalog.V[PlacedV1](1) in a code block is no link.
		prose := fenceRe.ReplaceAllString(string(b), "")
		for _, m := range linkRe.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s: link %s: %s does not exist", rel, target, file)
				continue
			}
			if anchor != "" && !fi.IsDir() && strings.HasSuffix(path, ".md") && !anchors(t, path)[anchor] {
				t.Errorf("%s: link %s: no heading #%s in %s", rel, target, anchor, file)
			}
		}
	}
	if links < 30 {
		t.Fatalf("checked %d links; the documentation has more", links)
	}
}

// TestNamedPathsExist: every repository path the documentation names in
// code (`examples/orders/infra`, `pkg/chain/SPEC.md`, …) exists.
func TestNamedPathsExist(t *testing.T) {
	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, page := range pages(t, root) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		if rel == filepath.Join("docs", "upgrading.md") {
			continue // it names where things were
		}
		for _, m := range codeRe.FindAllStringSubmatch(string(b), -1) {
			p := strings.TrimSuffix(strings.TrimSuffix(m[1], "/..."), "/")
			p, _, _ = strings.Cut(p, ":") // file:line
			if !repoPathRe.MatchString(p) || strings.HasSuffix(p, ".") || strings.Contains(p, "vX.Y.Z") {
				continue // not a path, or a release tag
			}
			named++
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
				t.Errorf("%s names %s, which does not exist", rel, m[1])
			}
		}
	}
	if named < 20 {
		t.Fatalf("checked %d named paths; the documentation names more", named)
	}
}

var (
	measuredRe = regexp.MustCompile(`(?s)<!-- measured -->(.*?)<!-- /measured -->`)
	numberRe   = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`)
	// A figure outside a measured block: a number with a unit that only a
	// run produces, on a line that says it was measured.
	looseFigureRe = regexp.MustCompile(`\d(?:\.\d+)?(?:×| ms| events/s)`)
)

// TestDesignNotesQuoteResults: DESIGN-NOTES.md quotes only figures that
// bench/RESULTS.md shows. Measured figures sit in <!-- measured --> blocks,
// and every number in one must appear in RESULTS.md; a line outside the
// blocks that calls a figure measured fails, so a rerun of the bench that
// changes a figure is caught until the notes are updated with it.
func TestDesignNotesQuoteResults(t *testing.T) {
	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(root, "DESIGN-NOTES.md"))
	if err != nil {
		t.Fatal(err)
	}
	results, err := os.ReadFile(filepath.Join(root, "bench", "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	for _, n := range numberRe.FindAllString(string(results), -1) {
		shown[strings.ReplaceAll(n, ",", "")] = true
	}
	blocks := measuredRe.FindAllStringSubmatch(string(notes), -1)
	if len(blocks) < 2 {
		t.Fatalf("DESIGN-NOTES.md has %d <!-- measured --> blocks; its measured figures belong in them", len(blocks))
	}
	quoted := 0
	for _, b := range blocks {
		for _, n := range numberRe.FindAllString(b[1], -1) {
			quoted++
			if !shown[strings.ReplaceAll(n, ",", "")] {
				t.Errorf("DESIGN-NOTES.md quotes %s as measured, which bench/RESULTS.md does not show: update the notes from the latest run", n)
			}
		}
	}
	if quoted < 20 {
		t.Fatalf("checked %d measured figures; the notes quote more", quoted)
	}
	in := false
	for i, line := range strings.Split(string(notes), "\n") {
		switch {
		case strings.Contains(line, "<!-- measured -->"):
			in = true
		case strings.Contains(line, "<!-- /measured -->"):
			in = false
		case !in && strings.Contains(strings.ToLower(line), "measured") && looseFigureRe.MatchString(line):
			t.Errorf("DESIGN-NOTES.md:%d quotes a measured figure outside a <!-- measured --> block: %q; quote it from bench/RESULTS.md inside one", i+1, line)
		}
	}
}
