package expr

// tokKind is a lexical token's kind.
type tokKind uint8

const (
	tEOF      tokKind = iota
	tIdent            // attribute name, keyword or function name: [A-Za-z][A-Za-z0-9_]*
	tName             // #name: an expression attribute name
	tValue            // :value: an expression attribute value
	tNumber           // digits (only meaningful as a list index)
	tLParen           // (
	tRParen           // )
	tLBracket         // [
	tRBracket         // ]
	tComma            // ,
	tDot              // .
	tEq               // =
	tNe               // <>
	tLt               // <
	tLe               // <=
	tGt               // >
	tGe               // >=
	tPlus             // +
	tMinus            // -
	tBad              // any other character, or a lone # or :
)

// token is a span of the expression; its text is src[start:end].
type token struct {
	kind       tokKind
	start, end int32
}

// An attribute name written in an expression starts with a letter and goes on with
// letters, digits and underscores: AWS answers `SET _123 = :v` with
// `Syntax error; token: "_", near: "SET _123"`, so "_" starts no name.
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isWord(c byte) bool   { return isLetter(c) || isDigit(c) || c == '_' }

// lex splits s into tokens, ending with one tEOF at len(s). It never fails: a
// character the grammar has no place for becomes a tBad token, which the parser
// reports as AWS does ("Syntax error; token: …").
func lex(s string, toks []token) []token {
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
		if i >= len(s) {
			return append(toks, token{kind: tEOF, start: int32(len(s)), end: int32(len(s))})
		}
		start := i
		c := s[i]
		var k tokKind
		switch {
		case isLetter(c):
			for i++; i < len(s) && isWord(s[i]); i++ {
			}
			k = tIdent
		case isDigit(c):
			for i++; i < len(s) && isDigit(s[i]); i++ {
			}
			k = tNumber
		case c == '#' || c == ':':
			for i++; i < len(s) && isWord(s[i]); i++ {
			}
			switch {
			case i == start+1:
				k = tBad
			case c == '#':
				k = tName
			default:
				k = tValue
			}
		default:
			i++
			switch c {
			case '(':
				k = tLParen
			case ')':
				k = tRParen
			case '[':
				k = tLBracket
			case ']':
				k = tRBracket
			case ',':
				k = tComma
			case '.':
				k = tDot
			case '=':
				k = tEq
			case '+':
				k = tPlus
			case '-':
				k = tMinus
			case '<':
				k = tLt
				if i < len(s) && s[i] == '>' {
					k, i = tNe, i+1
				} else if i < len(s) && s[i] == '=' {
					k, i = tLe, i+1
				}
			case '>':
				k = tGt
				if i < len(s) && s[i] == '=' {
					k, i = tGe, i+1
				}
			default:
				k = tBad
				// One whole UTF-8 character, so the message quotes it intact.
				for i < len(s) && s[i]&0xC0 == 0x80 {
					i++
				}
			}
		}
		toks = append(toks, token{kind: k, start: int32(start), end: int32(i)})
	}
}
