// Package identtest checks a name validator against the regular expression
// it replaces (package ident), for tests only.
package identtest

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// Agree checks that match and the regular expression pattern agree on
// strings built from valid (lengths up to maxLen+2, so every bound is
// crossed), half of them with one byte replaced by one of wild.
func Agree(t *testing.T, pattern, valid, wild string, maxLen int, match func(string) bool) {
	t.Helper()
	re := regexp.MustCompile(pattern)
	r := rand.New(rand.NewPCG(1, 2))
	matched := 0
	for i := 0; i < 20000; i++ {
		b := make([]byte, r.IntN(maxLen+3))
		for j := range b {
			b[j] = valid[r.IntN(len(valid))]
		}
		if len(b) > 0 && r.IntN(2) == 0 {
			b[r.IntN(len(b))] = wild[r.IntN(len(wild))]
		}
		s := string(b)
		want := re.MatchString(s)
		if got := match(s); got != want {
			t.Fatalf("%q: got %v, %s says %v", s, got, pattern, want)
		}
		if want {
			matched++
		}
	}
	if matched == 0 || matched == 20000 {
		t.Fatalf("%s: %d of 20000 strings matched; the test strings do not cover both answers", pattern, matched)
	}
}
