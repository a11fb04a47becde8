package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// escape makes s safe to print on a terminal: every character that a terminal could take
// as a command, or that could disguise the text around it, is replaced by a visible escape.
//
//   - C0 controls and DEL (U+0000–U+001F, U+007F): \t, \n, \r, else \xNN, so ESC becomes
//     \x1b and no CSI, OSC or DCS sequence reaches the terminal;
//   - C1 controls (U+0080–U+009F, among them the one-character CSI U+009B): \u0080…;
//   - bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A–U+202E,
//     U+2066–U+2069) and the line and paragraph separators U+2028, U+2029: \u202e…;
//   - each byte of invalid UTF-8: \xNN.
//
// Everything else, backslashes included, is kept, so ordinary text and JSON read as they
// are; the output is for people, not for parsing back. Every value that comes from a
// message (properties, keys, URNs, queues, errors, payload) is printed through escape.
func escape(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !needsEscape(r, size) {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// escapeBytes is escape for a byte slice.
func escapeBytes(p []byte) string { return escape(string(p)) }

func needsEscape(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return true // invalid UTF-8 (a literal U+FFFD decodes with size 3)
	case r < 0x20, r == 0x7f:
		return true // C0, DEL
	case r >= 0x80 && r <= 0x9f:
		return true // C1
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidirectional formatting
	case r == 0x2028, r == 0x2029:
		return true // line and paragraph separators
	default:
		return false
	}
}
