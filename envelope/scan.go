package envelope

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// text is the input of the scanner: the decoder scans its owned string copy of a payload,
// the encoder and Make scan caller-supplied []byte data without converting it.
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

// strPlain reports the bytes that may appear unescaped inside a JSON string without
// ending it: everything except control characters, '"' and '\\'.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func skipWS[T text](s T, i int) int {
	for i < len(s) && isWS(s[i]) {
		i++
	}
	return i
}

// scanValue validates the JSON value starting at s[i] (no leading whitespace) and returns
// the offset just past it and whether insignificant whitespace occurs inside it.
func scanValue[T text](s T, i, depth int) (int, bool, *syntaxError) {
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

func scanObject[T text](s T, i, depth int) (int, bool, *syntaxError) {
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
		end, w, err := scanValue(s, i, depth)
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

func scanArray[T text](s T, i, depth int) (int, bool, *syntaxError) {
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
		end, w, err := scanValue(s, i, depth)
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
func scanString[T text](s T, i int) (int, bool, *syntaxError) {
	start := i
	i++
	esc := false
	for {
		for i < len(s) && strPlain[s[i]] {
			i++
		}
		if i >= len(s) {
			return i, esc, errSyntax(start, "unterminated string")
		}
		switch c := s[i]; c {
		case '"':
			return i + 1, esc, nil
		case '\\':
			esc = true
			if i+1 >= len(s) {
				return i, esc, errSyntax(start, "unterminated string")
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(s)-i < 6 || hex4(s, i+2) < 0 {
					return i, esc, errSyntax(i, `invalid \u escape in a string`)
				}
				i += 6
			default:
				return i, esc, errSyntax(i, "invalid escape "+quoteByte(s[i+1])+" in a string")
			}
		default:
			return i, esc, errSyntax(i, "control character "+quoteByte(c)+" in a string")
		}
	}
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
	for k := 0; k < len(tok); k++ {
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
	b := make([]byte, 0, len(s))
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
	return string(b)
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

func errExpect[T text](s T, i int, want string) *syntaxError {
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
