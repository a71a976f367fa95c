package eventpattern

import (
	"errors"
	"sort"
	"strings"
	"unicode/utf8"
)

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// hasPrefixFold is strings.HasPrefix under Unicode simple case folding.
func hasPrefixFold(s, prefix string) bool {
	for prefix != "" {
		if s == "" {
			return false
		}
		pr, pn := utf8.DecodeRuneInString(prefix)
		sr, sn := utf8.DecodeRuneInString(s)
		if !strings.EqualFold(string(pr), string(sr)) {
			return false
		}
		prefix, s = prefix[pn:], s[sn:]
	}
	return true
}

// hasSuffixFold is strings.HasSuffix under Unicode simple case folding.
func hasSuffixFold(s, suffix string) bool {
	for suffix != "" {
		if s == "" {
			return false
		}
		pr, pn := utf8.DecodeLastRuneInString(suffix)
		sr, sn := utf8.DecodeLastRuneInString(s)
		if !strings.EqualFold(string(pr), string(sr)) {
			return false
		}
		suffix, s = suffix[:len(suffix)-pn], s[:len(s)-sn]
	}
	return true
}

// wildcardMatcher matches strings against literal segments separated by '*'.
type wildcardMatcher struct {
	segs []string // literal text around the stars; one segment = no star
}

// compileWildcard parses event-ruler's wildcard syntax: '*' matches any run
// of characters, "\*" is a literal star, "\\" a literal backslash; two stars
// in a row are refused.
func compileWildcard(p string) (wildcardMatcher, error) {
	var w wildcardMatcher
	var cur strings.Builder
	prevStar := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\\':
			if i+1 >= len(p) || (p[i+1] != '*' && p[i+1] != '\\') {
				return w, errors.New(`a backslash may only escape "*" or "\"`)
			}
			cur.WriteByte(p[i+1])
			i++
			prevStar = false
		case '*':
			if prevStar {
				return w, errors.New("consecutive wildcard characters are not allowed")
			}
			w.segs = append(w.segs, cur.String())
			cur.Reset()
			prevStar = true
		default:
			cur.WriteByte(c)
			prevStar = false
		}
	}
	w.segs = append(w.segs, cur.String())
	return w, nil
}

func (w wildcardMatcher) match(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	segs := w.segs
	if len(segs) == 1 { // no star at all
		return s == segs[0]
	}
	// First segment anchors at the start, last at the end; the middle ones
	// are found left to right, which is optimal for '*'-only globs.
	if !strings.HasPrefix(s, segs[0]) {
		return false
	}
	s = s[len(segs[0]):]
	last := segs[len(segs)-1]
	for _, seg := range segs[1 : len(segs)-1] {
		i := strings.Index(s, seg)
		if i < 0 {
			return false
		}
		s = s[i+len(seg):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}
