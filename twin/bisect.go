package twin

import (
	"fmt"
	"slices"
	"strings"
)

// CheckBisectRule checks the invocations a stream source made (the journal
// entries of one Pipe or mapping) against AWS's rule for a bisecting
// source with maxRetries: after an invocation of n > 1 records fails
// without progress, the next ones on those records are its first and
// second halves; a single record that fails is invoked again until it has
// failed maxRetries + 1 times, then goes to the destination alone; every
// other record is delivered. It returns the first violation, or nil.
func CheckBisectRule(es []Entry, maxRetries int) error {
	var invokes []invocationView
	var idx []int // journal index of each invoke
	for i, e := range es {
		if e.Kind == KindInvoke {
			invokes = append(invokes, invocationView{items: e.Items, ok: e.OK()})
			idx = append(idx, i)
		}
	}
	// A Pipe's failure can come after a successful invocation (the target
	// refused the batch): take failure from the bisect/retry/destination
	// entries that follow the invocation.
	failedAfter := func(k int) bool {
		end := len(es)
		if k+1 < len(idx) {
			end = idx[k+1]
		}
		for _, e := range es[idx[k]+1 : end] {
			switch e.Kind {
			case KindBisect, KindRetry, KindDestination, KindFailed:
				return true
			}
		}
		return !invokes[k].ok
	}
	for k := range invokes {
		if !failedAfter(k) {
			continue
		}
		c := invokes[k]
		if len(c.items) > 1 {
			if partial := partialProgress(es, idx, k); partial {
				continue
			}
			h := len(c.items) / 2
			if k+1 >= len(invokes) || !slices.Equal(invokes[k+1].items, c.items[:h]) {
				return fmt.Errorf("invocation %d of %v failed: the next invocation should be its first half %v, got %v", k+1, c.items, c.items[:h], next(invokes, k))
			}
			continue
		}
		// A single record: count its consecutive failed invocations.
		run := 1
		for j := k - 1; j >= 0 && slices.Equal(invokes[j].items, c.items) && failedAfter(j); j-- {
			run++
		}
		if run > maxRetries+1 {
			return fmt.Errorf("record %v was invoked alone %d times: more than 1 + %d retries", c.items, run, maxRetries)
		}
		retried := k+1 < len(invokes) && slices.Equal(invokes[k+1].items, c.items)
		agedOut := slices.ContainsFunc(es[idx[k]:], func(e Entry) bool {
			return e.Kind == KindDestination && slices.Equal(e.Items, c.items) && strings.HasPrefix(e.Outcome, CondRecordAge)
		})
		if run < maxRetries+1 && !retried && !agedOut {
			return fmt.Errorf("record %v failed alone %d time(s) and was not retried (limit %d retries)", c.items, run, maxRetries)
		}
	}
	// Records past MaximumRecordAgeInSeconds skip to the destination
	// together, uninvoked; only a failure is isolated to one record.
	for _, e := range es {
		if e.Kind == KindDestination && len(e.Items) != 1 && !strings.HasPrefix(e.Outcome, CondRecordAge) {
			return fmt.Errorf("destination got %d records %v at once: bisect should isolate one", len(e.Items), e.Items)
		}
	}
	return nil
}

// partialProgress reports whether invocation k delivered part of its batch
// (a partial batch response), after which the rest is retried, not halved.
func partialProgress(es []Entry, idx []int, k int) bool {
	end := len(es)
	if k+1 < len(idx) {
		end = idx[k+1]
	}
	for _, e := range es[idx[k]+1 : end] {
		if e.Kind == KindDelivered {
			return true
		}
	}
	return false
}

type invocationView struct {
	items []string
	ok    bool
}

func next(cs []invocationView, k int) []string {
	if k+1 < len(cs) {
		return cs[k+1].items
	}
	return nil
}

// SourceEntries selects the entries of one Pipe or mapping, in order.
func SourceEntries(j *Journal, source string) []Entry {
	return j.Entries(func(e Entry) bool { return e.Source == source })
}
