package ident_test

import (
	"regexp"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/internal/ident"
	"github.com/fourlanes/fourlanes/pkg/internal/ident/identtest"
)

func TestWord(t *testing.T) {
	re := regexp.MustCompile(`^[a-z][a-z0-9-]{0,3}$`)
	for _, s := range []string{"", "a", "a-", "-a", "ab9-", "ab9-x", "A", "a_", "é", "aé"} {
		if got, want := ident.Word(s, 4, ident.Lower, ident.LowerDigitHyphen), re.MatchString(s); got != want {
			t.Errorf("Word(%q): got %v, want %v", s, got, want)
		}
	}
	if !ident.Word("abcdefghijklmnopqrstuvwxyz", 0, ident.Lower, ident.Lower) {
		t.Error("Word with no limit: a long word should match")
	}
}

func TestAgree(t *testing.T) {
	identtest.Agree(t, `^[a-z][a-z0-9_-]{0,9}$`, "ab0_-", "A.é", 10, func(s string) bool {
		return ident.Word(s, 10, ident.Lower, ident.LowerDigitUnderscoreHyphen)
	})
}
