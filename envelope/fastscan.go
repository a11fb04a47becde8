package envelope

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// The fast scanner. scanValue first gives a value to fastValue, which validates the JSON
// text that real producers send in one loop: no call per member or element, a string of
// up to 15 plain bytes recognised from two words, an integer read inline. It answers only
// "valid, ending here" or "cannot tell": escapes, non-ASCII text, fractions and the last
// bytes of the input go to the general scanner's own functions (scanString, scanNumber),
// and anything it does not accept (malformed text, nesting deeper than it tracks) goes to
// the general scanner, slowValue, from the value's start. Every error therefore comes from
// the general scanner, word for word, and an accepted value ends where the general scanner
// says it ends, with the same whitespace flag: FuzzFastScanAgrees and
// FuzzClassifyFastPathAgrees check both against the general scanner.

// fastDepth is the nesting that fastValue tracks, one bit a level; a deeper value goes to
// the general scanner.
const fastDepth = 256

// fastValue validates the JSON value at s[i] (no leading whitespace) nested depth levels
// deep, and returns the offset just past it and whether insignificant whitespace occurs
// inside it; ok is false when it cannot tell (see the comment above).
func fastValue(s []byte, i, depth int) (end int, ws, ok bool) {
	var inArray [fastDepth / 64]uint64 // bit k set: level k+1 of this value is an array
	n := 0                             // the levels open
	limit := min(fastDepth, maxDepth-depth)
	closer := byte(0) // what closes the innermost open level: '}' or ']'
	key := false      // whether an object key comes before the value
	for {
		if key { // an object key, its colon and the whitespace around it
			key = false
			if i >= len(s) || s[i] != '"' {
				return 0, false, false
			}
			if j := shortString(s, i); j > 0 {
				i = j
			} else if i = fastString(s, i); i < 0 {
				return 0, false, false
			}
			if i < len(s) && s[i] == ':' { // compact text: the colon right after the key
				i++
			} else {
				j := skipWS(s, i)
				ws = ws || j != i
				if i = j; i >= len(s) || s[i] != ':' {
					return 0, false, false
				}
				i++
			}
			if i < len(s) && s[i] <= ' ' {
				j := skipWS(s, i)
				ws = ws || j != i
				i = j
			}
		}
		// A value at s[i].
		if i >= len(s) {
			return 0, false, false
		}
		switch c := s[i]; {
		case c == '"':
			if j := shortString(s, i); j > 0 {
				i = j
			} else if i = fastString(s, i); i < 0 {
				return 0, false, false
			}
		case c == '{' || c == '[':
			if n >= limit {
				return 0, false, false
			}
			if c == '[' {
				inArray[n>>6] |= 1 << (n & 63)
			} else {
				inArray[n>>6] &^= 1 << (n & 63)
			}
			n++
			closer = c + 2 // '{'+2 is '}', '['+2 is ']'
			i++
			if i < len(s) && s[i] <= ' ' {
				j := skipWS(s, i)
				ws = ws || j != i
				i = j
			}
			if i < len(s) && s[i] == closer {
				n--
				closer = closerOf(&inArray, n)
				i++
				break // an empty container is a value
			}
			key = c == '{'
			continue // the first member or element
		case c >= '1' && c <= '9':
			i++
			for i < len(s) && s[i]-'0' <= 9 {
				i++
			}
			if i < len(s) && (s[i] == '.' || s[i]|0x20 == 'e') {
				if i = fastFraction(s, i); i < 0 {
					return 0, false, false
				}
			}
		case c == '-' || c == '0':
			if i = fastNumber(s, i); i < 0 {
				return 0, false, false
			}
		case c == 't':
			if len(s)-i < 4 || string(s[i:i+4]) != "true" {
				return 0, false, false
			}
			i += 4
		case c == 'f':
			if len(s)-i < 5 || string(s[i:i+5]) != "false" {
				return 0, false, false
			}
			i += 5
		case c == 'n':
			if len(s)-i < 4 || string(s[i:i+4]) != "null" {
				return 0, false, false
			}
			i += 4
		default:
			return 0, false, false
		}
		// After a value: close the containers that end here, then go on to the next
		// member or element.
		for {
			if n == 0 {
				return i, ws, true
			}
			if i >= len(s) {
				return 0, false, false
			}
			c := s[i]
			if c <= ' ' {
				j := skipWS(s, i)
				ws = ws || j != i
				if i = j; i >= len(s) {
					return 0, false, false
				}
				c = s[i]
			}
			if c == ',' {
				i++
				if i < len(s) && s[i] <= ' ' {
					j := skipWS(s, i)
					ws = ws || j != i
					i = j
				}
				key = closer == '}'
				break
			}
			if c != closer {
				return 0, false, false
			}
			n--
			closer = closerOf(&inArray, n)
			i++
		}
	}
}

// closerOf returns what closes level n of a value whose levels' kinds are in inArray
// (bit k set: level k+1 is an array), or 0 for level 0, outside the value.
func closerOf(inArray *[fastDepth / 64]uint64, n int) byte {
	if n == 0 {
		return 0
	}
	k := n - 1
	return '}' - byte(inArray[k>>6]>>(k&63)&1)*('}'-']')
}

// shortString returns the offset just past the string at s[i] == '"' when it holds at
// most 7 plain bytes (see plain) and 8 more bytes follow it, and 0 otherwise (then
// fastString decides). It is small enough to be inlined: most keys and many values are
// that short.
func shortString(s []byte, i int) int {
	if i+9 <= len(s) {
		if m := specialBytes(binary.LittleEndian.Uint64(s[i+1 : i+9])); m != 0 {
			if k := i + 1 + bits.TrailingZeros64(m)>>3; s[k] == '"' {
				return k + 1
			}
		}
	}
	return 0
}

// fastString returns the offset just past the valid string at s[i] == '"', or -1 when it
// cannot tell. It skips eight plain bytes (see plain) at a time; a two-byte UTF-8 sequence
// is checked in place and a longer one by runeLen; the escapes \" \\ \/ \b \f \n \r \t
// and \uXXXX are read in place. Anything else (a control character, a bad escape or UTF-8
// sequence, the last bytes of the input) is left to scanString, whose errors say what it is.
func fastString(s []byte, i int) int {
	k := i + 1
	for {
		for len(s)-k >= 8 {
			if m := specialBytes(binary.LittleEndian.Uint64(s[k:])); m != 0 {
				k += bits.TrailingZeros64(m) >> 3
				goto special
			}
			k += 8
		}
		for k < len(s) && plain(s[k]) {
			k++
		}
		if k >= len(s) {
			return -1
		}
	special:
		switch c := s[k]; {
		case c == '"':
			return k + 1
		case c == '\\':
			if k+1 >= len(s) {
				return -1
			}
			switch s[k+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				k += 2
			case 'u':
				if len(s)-k < 6 || hex4(s, k+2) < 0 {
					return -1
				}
				k += 6
			default:
				return -1
			}
		case c >= 0xC2 && c < 0xE0 && k+1 < len(s) && s[k+1]&0xC0 == 0x80: // two bytes
			k += 2
		case c > 0xE0 && c < 0xF0 && c != 0xED && k+2 < len(s) && s[k+1]&0xC0 == 0x80 && s[k+2]&0xC0 == 0x80:
			k += 3 // three bytes, but for E0 and ED, whose second byte has a narrower range
		case c >= utf8.RuneSelf:
			n := runeLen(s, k)
			if n == 0 {
				return -1
			}
			k += n
		default: // a control character
			return -1
		}
	}
}

// fastNumber returns the offset just past the valid number at s[i] ('-' or a digit), or
// -1 when it is not one (a leading zero followed by a digit, say, which is two tokens).
func fastNumber(s []byte, i int) int {
	if s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s):
		return -1
	case s[i] == '0':
		i++
	case s[i]-'1' <= 8:
		for i++; i < len(s) && s[i]-'0' <= 9; i++ {
		}
	default:
		return -1
	}
	if i < len(s) && (s[i] == '.' || s[i]|0x20 == 'e') {
		return fastFraction(s, i)
	}
	if i < len(s) && s[i]-'0' <= 9 {
		return -1
	}
	return i
}

// fastFraction returns the offset just past the fraction and exponent of a number at s[i]
// ('.', 'e' or 'E'), or -1 when they are malformed.
func fastFraction(s []byte, i int) int {
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j]-'0' <= 9 {
			j++
		}
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for j < len(s) && s[j]-'0' <= 9 {
			j++
		}
		if j == i {
			return -1
		}
		i = j
	}
	return i
}
