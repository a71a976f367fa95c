package attr

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestCompareNumbersMatchesDecimal checks the text comparison of canonical numbers
// against apd's on edge cases and on random numbers of every shape DynamoDB stores
// (signs, fractions below one, 38 digits, the range's ends), and that non-canonical
// text still compares as decimals.
func TestCompareNumbersMatchesDecimal(t *testing.T) {
	texts := []string{
		"0", "1", "-1", "0.5", "-0.5", "0.05", "0.25", "10", "9", "-9", "-10", "2.5", "2.45", "-2.5", "-2.45",
		"1E+125", "-1E+125", "9.9999999999999999999999999999999999999E+125", "1E-130", "-1E-130",
		"12345678901234567890123456789012345678", "0.12345678901234567890123456789012345678",
		"100", "100.001", "99.999", "-100.001", "-99.999",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteByte('-')
		}
		for range r.IntN(6) {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		if b.Len() == 0 || b.String() == "-" {
			b.WriteByte('0')
		}
		if r.IntN(2) == 0 {
			b.WriteByte('.')
			for range 1 + r.IntN(5) {
				b.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		if r.IntN(4) == 0 {
			b.WriteString("E" + strconv.Itoa(r.IntN(60)-30))
		}
		texts = append(texts, b.String())
	}
	var canon []string
	for _, s := range texts {
		c, _, err := ParseNumber(s)
		if err != nil {
			t.Fatalf("ParseNumber(%q): %v", s, err)
		}
		if _, _, _, ok := splitCanonical(c); !ok {
			t.Fatalf("ParseNumber(%q) = %q, which splitCanonical refuses", s, c)
		}
		canon = append(canon, c)
	}
	check := func(a, b string) {
		t.Helper()
		if got, want := CompareNumbers(a, b), Decimal(a).Cmp(Decimal(b)); got != want {
			t.Fatalf("CompareNumbers(%q, %q): got %d, want %d", a, b, got, want)
		}
	}
	for i := range canon {
		for j := range 40 {
			check(canon[i], canon[(i*7+j)%len(canon)])
		}
	}
	for _, s := range []string{"01", "1.50", "-0", "1e3", "+5", ".5", "5."} {
		for _, o := range []string{"0", "1", "5", "1000", "-1"} {
			if _, _, _, ok := splitCanonical(s); ok {
				t.Errorf("splitCanonical(%q): ok, want refused", s)
			}
			check(s, o)
			check(o, s)
		}
	}
}

// BenchmarkCompareNumbers: "text" is CompareNumbers, "decimal" the apd comparison it
// replaced for canonical texts.
func BenchmarkCompareNumbers(b *testing.B) {
	pairs := [][2]string{{"12345", "12346"}, {"-0.5", "0.25"}, {"1000000", "999999.999"}}
	b.Run("text", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			p := pairs[i%len(pairs)]
			CompareNumbers(p[0], p[1])
		}
	})
	b.Run("decimal", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			p := pairs[i%len(pairs)]
			Decimal(p[0]).Cmp(Decimal(p[1]))
		}
	})
}
