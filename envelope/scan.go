package envelope

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// text is the input of the helpers that read both kinds of text: JSON values are scanned as
// []byte (the payload of Decode, the data given to the encoder and Make), while numbers and
// escaped strings are also read from strings.
type text interface{ ~string | ~[]byte }

// maxDepth bounds the nesting of arrays and objects, as encoding/json does, so that a hostile
// payload cannot exhaust the stack.
const maxDepth = 10000

// syntaxError describes malformed JSON text at a byte offset of the scanned input.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) String() string {
	return e.msg + " at byte " + strconv.Itoa(e.off)
}

func errSyntax(off int, msg string) *syntaxError { return &syntaxError{off: off, msg: msg} }

// wsMask has bit c set for each JSON whitespace byte c (all are at most ' ', and every
// byte that may follow whitespace in valid JSON is above it: one comparison decides).
const wsMask = 1<<' ' | 1<<'\n' | 1<<'\r' | 1<<'\t'

func isWS(c byte) bool { return c <= ' ' && wsMask&(uint64(1)<<c) != 0 }

// skipWS returns the offset of the first byte at or after s[i] that is not whitespace.
func skipWS(s []byte, i int) int {
	for i < len(s) && isWS(s[i]) {
		i++
	}
	return i
}

// scanValue validates the JSON value starting at s[i] (no leading whitespace), nested depth
// levels deep, and returns the offset just past it and whether insignificant whitespace
// occurs inside it. fastValue decides most valid values; what it cannot tell, every error
// among it, the general scanner (slowValue) decides.
func scanValue(s []byte, i, depth int) (int, bool, *syntaxError) {
	if end, ws, ok := fastValue(s, i, depth); ok {
		return end, ws, nil
	}
	return slowValue(s, i, depth)
}

// slowValue is the general scanner of scanValue: one function per kind of value, whose
// errors say what was expected where.
func slowValue(s []byte, i, depth int) (int, bool, *syntaxError) {
	if i >= len(s) {
		return i, false, errSyntax(i, "unexpected end of input")
	}
	switch c := s[i]; {
	case c == '{':
		return scanObject(s, i, depth+1)
	case c == '[':
		return scanArray(s, i, depth+1)
	case c == '"':
		end, _, err := scanString(s, i)
		return end, false, err
	case c == '-' || (c >= '0' && c <= '9'):
		end, _, err := scanNumber(s, i)
		return end, false, err
	case c == 't':
		return scanLiteral(s, i, "true")
	case c == 'f':
		return scanLiteral(s, i, "false")
	case c == 'n':
		return scanLiteral(s, i, "null")
	default:
		return i, false, errSyntax(i, "invalid character "+quoteByte(c)+" looking for a value")
	}
}

func scanLiteral[T text](s T, i int, lit string) (int, bool, *syntaxError) {
	if len(s)-i < len(lit) {
		return i, false, errSyntax(i, "invalid literal, want "+lit)
	}
	for k := 0; k < len(lit); k++ {
		if s[i+k] != lit[k] {
			return i, false, errSyntax(i+k, "invalid literal, want "+lit)
		}
	}
	return i + len(lit), false, nil
}

func scanObject(s []byte, i, depth int) (int, bool, *syntaxError) {
	if depth > maxDepth {
		return i, false, errSyntax(i, "nesting deeper than "+strconv.Itoa(maxDepth))
	}
	j := skipWS(s, i+1)
	ws := j != i+1
	i = j
	if i < len(s) && s[i] == '}' {
		return i + 1, ws, nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return i, ws, errExpect(s, i, "a string key")
		}
		end, _, err := scanString(s, i)
		if err != nil {
			return end, ws, err
		}
		j = skipWS(s, end)
		ws = ws || j != end
		if j >= len(s) || s[j] != ':' {
			return j, ws, errExpect(s, j, "':' after an object key")
		}
		i = skipWS(s, j+1)
		ws = ws || i != j+1
		end, w, err := slowValue(s, i, depth)
		if err != nil {
			return end, ws, err
		}
		i = skipWS(s, end)
		ws = ws || w || i != end
		if i >= len(s) {
			return i, ws, errSyntax(i, "unexpected end of input in an object")
		}
		switch s[i] {
		case ',':
			j = skipWS(s, i+1)
			ws = ws || j != i+1
			i = j
		case '}':
			return i + 1, ws, nil
		default:
			return i, ws, errExpect(s, i, "',' or '}' after an object member")
		}
	}
}

func scanArray(s []byte, i, depth int) (int, bool, *syntaxError) {
	if depth > maxDepth {
		return i, false, errSyntax(i, "nesting deeper than "+strconv.Itoa(maxDepth))
	}
	j := skipWS(s, i+1)
	ws := j != i+1
	i = j
	if i < len(s) && s[i] == ']' {
		return i + 1, ws, nil
	}
	for {
		end, w, err := slowValue(s, i, depth)
		if err != nil {
			return end, ws, err
		}
		i = skipWS(s, end)
		ws = ws || w || i != end
		if i >= len(s) {
			return i, ws, errSyntax(i, "unexpected end of input in an array")
		}
		switch s[i] {
		case ',':
			j = skipWS(s, i+1)
			ws = ws || j != i+1
			i = j
		case ']':
			return i + 1, ws, nil
		default:
			return i, ws, errExpect(s, i, "',' or ']' after an array element")
		}
	}
}

// scanString validates the JSON string starting at s[i] == '"' and returns the offset just
// past its closing quote and whether it contains escape sequences. Escapes are checked for
// syntax only: a lone UTF-16 surrogate such as \ud800 is accepted (see the package doc).
// Bytes above ASCII must form valid UTF-8 (errUTF8 otherwise), so a payload whose strings
// all pass holds non-ASCII bytes nowhere else: outside strings JSON allows ASCII only.
func scanString(s []byte, i int) (int, bool, *syntaxError) {
	start := i
	i++
	esc := false
	for {
		// Skip plain bytes (see plain) eight at a time; the lowest flagged byte of a word
		// is exact. The last few bytes of the input go one at a time.
		if len(s)-i >= 8 {
			m := specialBytes(binary.LittleEndian.Uint64(s[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		} else {
			for i < len(s) && plain(s[i]) {
				i++
			}
			if i >= len(s) {
				return i, esc, errSyntax(start, "unterminated string")
			}
		}
		if s[i] == '"' {
			return i + 1, esc, nil
		}
		var isEsc bool
		var err *syntaxError
		if i, isEsc, err = scanSpecial(s, start, i); err != nil {
			return i, esc || isEsc, err
		}
		esc = esc || isEsc
	}
}

// scanSpecial validates the escape sequence, UTF-8 sequence or (invalid) control character
// at s[i] inside the string that starts at s[start], and returns the offset just past it and
// whether it is an escape. It is kept apart from scanString, whose loop over plain bytes is
// the common case.
func scanSpecial(s []byte, start, i int) (int, bool, *syntaxError) {
	switch c := s[i]; {
	case c == '\\':
		if i+1 >= len(s) {
			return i, true, errSyntax(start, "unterminated string")
		}
		switch s[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			return i + 2, true, nil
		case 'u':
			if len(s)-i < 6 || hex4(s, i+2) < 0 {
				return i, true, errSyntax(i, `invalid \u escape in a string`)
			}
			return i + 6, true, nil
		default:
			return i, true, errSyntax(i, "invalid escape "+quoteByte(s[i+1])+" in a string")
		}
	case c >= utf8.RuneSelf:
		n := runeLen(s, i)
		if n == 0 {
			return i, false, errSyntax(i, errUTF8)
		}
		return i + n, false, nil
	default:
		return i, false, errSyntax(i, "control character "+quoteByte(c)+" in a string")
	}
}

// errUTF8 is the message of the syntax error for a string that is not valid UTF-8. Decode
// reports any failure of a payload that is not valid UTF-8 as RuleUTF8 instead.
const errUTF8 = "invalid UTF-8 in a string"

// plain reports whether c may appear in a string as itself and is ASCII: everything except
// control characters, '"', '\\' and bytes of multi-byte UTF-8 sequences.
func plain(c byte) bool { return c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' }

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// specialBytes sets the high bit of each byte of x that is not plain (see plain), and
// possibly of bytes above the lowest such byte, so the lowest set bit is exact. Byte by
// byte, b-0x20 has its high bit set when b < 0x20, (b^'"')-1 when b == '"' and (b^'\\')-1
// when b == '\\'; for other bytes below 0x80 none of the three has it, for bytes from 0x80
// up the byte itself has it. A borrow across bytes starts only at a byte below 0x20, '"' or
// '\\', so it changes nothing below the lowest flagged byte.
func specialBytes(x uint64) uint64 {
	return ((x - 0x20*lsb) | (x ^ '"'*lsb - lsb) | (x ^ '\\'*lsb - lsb) | x) & msb
}

// loadString64 returns the eight bytes of s at i as a little-endian word, as
// binary.LittleEndian.Uint64 does for a slice (the compiler makes it one load).
func loadString64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// runeLen returns the length of the valid UTF-8 sequence starting at s[i] (a byte above
// ASCII), or 0 when it is invalid: the sequences utf8.Valid accepts, without overlong forms,
// surrogates or code points above U+10FFFF.
func runeLen(s []byte, i int) int {
	c := s[i]
	n := len(s) - i
	cont := func(k int) bool { return s[i+k]&0xC0 == 0x80 }
	switch {
	case c < 0xC2:
		return 0
	case c < 0xE0:
		if n < 2 || !cont(1) {
			return 0
		}
		return 2
	case c < 0xF0:
		if n < 3 {
			return 0
		}
		lo, hi := byte(0x80), byte(0xBF)
		switch c {
		case 0xE0:
			lo = 0xA0
		case 0xED:
			hi = 0x9F
		}
		if c1 := s[i+1]; c1 < lo || c1 > hi || !cont(2) {
			return 0
		}
		return 3
	case c < 0xF5:
		if n < 4 {
			return 0
		}
		lo, hi := byte(0x80), byte(0xBF)
		switch c {
		case 0xF0:
			lo = 0x90
		case 0xF4:
			hi = 0x8F
		}
		if c1 := s[i+1]; c1 < lo || c1 > hi || !cont(2) || !cont(3) {
			return 0
		}
		return 4
	}
	return 0
}

// scanNumber validates the JSON number starting at s[i] and reports whether it is an
// integer (no fraction, no exponent).
func scanNumber[T text](s T, i int) (int, bool, *syntaxError) {
	if s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s):
		return i, false, errSyntax(i, "unexpected end of input in a number")
	case s[i] == '0':
		i++
	case s[i] >= '1' && s[i] <= '9':
		i = digits(s, i+1)
	default:
		return i, false, errSyntax(i, "invalid character "+quoteByte(s[i])+" in a number")
	}
	isInt := true
	if i < len(s) && s[i] == '.' {
		isInt = false
		j := digits(s, i+1)
		if j == i+1 {
			return j, false, errSyntax(j, "missing digits after the decimal point")
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		isInt = false
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(s, i)
		if j == i {
			return j, false, errSyntax(j, "missing digits in an exponent")
		}
		i = j
	}
	return i, isInt, nil
}

func digits[T text](s T, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// parseInt parses a JSON integer token (already validated by scanNumber) and reports
// whether it fits an int64.
func parseInt(tok string) (int64, bool) {
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	const limit = uint64(1) << 63
	var n uint64
	k := 0
	for ; k < len(tok) && k < 18; k++ { // 18 digits cannot overflow
		n = n*10 + uint64(tok[k]-'0')
	}
	for ; k < len(tok); k++ {
		d := uint64(tok[k] - '0')
		if n > (limit-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		return -int64(n), true // n <= 1<<63; -int64(1<<63) wraps to MinInt64 exactly
	}
	if n >= limit {
		return 0, false
	}
	return int64(n), true
}

// hex4 decodes the four hex digits at s[i:i+4], or returns -1.
func hex4[T text](s T, i int) rune {
	var r rune
	for k := i; k < i+4; k++ {
		c := s[k]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unescape decodes the body of a JSON string that contains escapes (already validated by
// scanString). A lone or mismatched UTF-16 surrogate becomes U+FFFD, as encoding/json does.
func unescape(s string) string {
	return string(appendUnescape(make([]byte, 0, len(s)), s))
}

// appendUnescape appends the decoded body s of a JSON string that contains escapes (see
// unescape); it appends at most len(s) bytes.
func appendUnescape[T text](b []byte, s T) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			b = append(b, c)
			i++
			continue
		}
		switch e := s[i+1]; e {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(s, i+2)
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if len(s)-i >= 6 && s[i] == '\\' && s[i+1] == 'u' {
					r2 = hex4(s, i+2)
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
			continue
		default: // '"', '\\', '/'
			b = append(b, e)
		}
		i += 2
	}
	return b
}

// appendCompact appends the valid JSON text src without insignificant whitespace.
func appendCompact[T text](dst []byte, src T) []byte {
	inStr := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case inStr:
			dst = append(dst, c)
			switch c {
			case '\\':
				i++
				dst = append(dst, src[i])
			case '"':
				inStr = false
			}
		case isWS(c):
		default:
			dst = append(dst, c)
			inStr = c == '"'
		}
	}
	return dst
}

// kindOf names the JSON type of the valid value starting with c, for error details.
func kindOf(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func errExpect(s []byte, i int, want string) *syntaxError {
	if i >= len(s) {
		return errSyntax(i, "unexpected end of input, want "+want)
	}
	return errSyntax(i, "invalid character "+quoteByte(s[i])+", want "+want)
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return "0x" + strconv.FormatUint(uint64(c), 16)
}
