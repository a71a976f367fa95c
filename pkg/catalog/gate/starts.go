package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/catalog"
)

// StartsFile is where, in the schemas folder, the gate records the start of
// every DURABLE subscription (check 6).
const StartsFile = "starts.json"

// recordedStartsFile is StartsFile's content.
type recordedStartsFile struct {
	Comment string            `json:"$comment"`
	Starts  map[string]string `json:"starts"` // subscription → catalog.Start.String()
}

const startsComment = "The declared start of each DURABLE subscription, recorded by the catalog gate. " +
	"A subscription's start is recorded on the stack when it first goes live, so it never changes here: history reaches a live subscription through `fourlanes backfill`."

// durableStarts is every DURABLE subscription's declared start, and where
// it is declared.
func (r *Report) durableStarts() (map[string]string, map[string]token.Position) {
	starts, pos := map[string]string{}, map[string]token.Position{}
	for _, m := range r.Modules {
		for _, s := range m.Spec.Subscribes {
			if s.Lane == catalog.Durable {
				starts[s.Name], pos[s.Name] = s.Start.String(), m.subPos[s.Name]
			}
		}
	}
	return starts, pos
}

// startChanged is check 6's message: sub's start was recorded as was (in
// file), and is declared as now; record says how to record a new start.
func startChanged(sub, was, now, file, record string) string {
	return fmt.Sprintf("subscription %s: Start changed from %s (as %s records it) to %s. A DURABLE subscription's start is recorded when it first goes live: "+
		"where it is live this changes nothing, and where it is not yet live it silently changes the history it is given. "+
		"Keep Start %s and deliver history with `fourlanes backfill -subscription %s -from SEQ|TIME`; "+
		"only if the subscription is deployed nowhere yet, %s",
		sub, was, file, now, was, sub, record)
}

// checkStarts is check 6 against the starts recorded in dir (write: first
// record the subscriptions added and forget those removed; a changed start
// is never rewritten).
func (r *Report) checkStarts(root, dir string, write bool) error {
	file := filepath.Join(dir, StartsFile)
	rel := filepath.ToSlash(file)
	if x, err := filepath.Rel(root, file); err == nil {
		rel = filepath.ToSlash(x)
	}
	declared, pos := r.durableStarts()
	b, err := os.ReadFile(file)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return fmt.Errorf("read the recorded starts: %w", err)
	}
	violate := func(p token.Position, format string, args ...any) {
		r.Violations = append(r.Violations, Violation{Pos: p, Check: 6, Msg: fmt.Sprintf(format, args...)})
	}
	filePos := token.Position{Filename: rel}
	regen := fmt.Sprintf("fourlanes gate -schemas %s -write-schemas", filepath.ToSlash(filepath.Dir(rel)))
	rec := recordedStartsFile{Starts: map[string]string{}}
	if !missing {
		if err := json.Unmarshal(b, &rec); err != nil || rec.Starts == nil {
			violate(filePos, "%s is not a file the gate wrote (%v); restore it from version control", rel, err)
			return nil
		}
	}
	next := map[string]string{}
	var added, removed []string
	for sub, now := range declared {
		was, ok := rec.Starts[sub]
		switch {
		case !ok:
			added = append(added, sub)
			next[sub] = now
		case was != now:
			violate(pos[sub], "%s", startChanged(sub, was, now, rel, "delete its line from "+rel+" and run `"+regen+"`"))
			next[sub] = was
		default:
			next[sub] = was
		}
	}
	for sub := range rec.Starts {
		if _, ok := declared[sub]; !ok {
			removed = append(removed, sub)
		}
	}
	want, err := json.MarshalIndent(recordedStartsFile{Comment: startsComment, Starts: next}, "", "  ")
	if err != nil {
		return err
	}
	want = append(want, '\n')
	if bytes.Equal(b, want) || (missing && len(declared) == 0) {
		return nil
	}
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("record the starts: %w", err)
		}
		if err := os.WriteFile(file, want, 0o644); err != nil {
			return fmt.Errorf("record the starts: %w", err)
		}
		return nil
	}
	if missing {
		violate(filePos, "%s: no recorded starts of the DURABLE subscriptions; write it with `%s` and check it in", rel, regen)
		return nil
	}
	sort.Strings(added)
	sort.Strings(removed)
	var what []string
	if len(added) > 0 {
		what = append(what, "declared since: "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		what = append(what, "no longer declared: "+strings.Join(removed, ", "))
	}
	if len(what) == 0 && !slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Check == 6 }) {
		what = append(what, "formatting")
	}
	if len(what) > 0 {
		violate(filePos, "%s is stale (%s); regenerate it with `%s` and check it in", rel, strings.Join(what, "; "), regen)
	}
	return nil
}
