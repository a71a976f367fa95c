// Package ident checks the forms of the names fourlanes validates (module,
// subscription, owner, application, effect and follow-on names, entities)
// without regular expressions: compiling one with a bounded repetition such
// as {0,127} costs a tenth of a millisecond or more, and a package-level
// regexp.MustCompile pays it at package initialisation, on every cold start
// of every function that links the package.
package ident

// Word reports whether s is a byte for which first holds followed by bytes
// for which rest holds, at most max bytes in all (no limit when max is 0):
// the regular expression ^[first][rest]{0,max-1}$ over ASCII classes.
func Word(s string, max int, first, rest func(byte) bool) bool {
	if s == "" || (max > 0 && len(s) > max) || !first(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !rest(s[i]) {
			return false
		}
	}
	return true
}

// Lower is [a-z].
func Lower(c byte) bool { return 'a' <= c && c <= 'z' }

// Upper is [A-Z].
func Upper(c byte) bool { return 'A' <= c && c <= 'Z' }

// Digit is [0-9].
func Digit(c byte) bool { return '0' <= c && c <= '9' }

// LowerDigit is [a-z0-9].
func LowerDigit(c byte) bool { return Lower(c) || Digit(c) }

// LowerDigitHyphen is [a-z0-9-].
func LowerDigitHyphen(c byte) bool { return LowerDigit(c) || c == '-' }

// LowerDigitUnderscoreHyphen is [a-z0-9_-].
func LowerDigitUnderscoreHyphen(c byte) bool { return LowerDigitHyphen(c) || c == '_' }
