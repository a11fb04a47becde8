package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain text, ünïcödé and 日本語", "plain text, ünïcödé and 日本語"},
		{`back\slash "quotes" stay`, `back\slash "quotes" stay`},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},                     // OSC: retitle the window
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},                           // CSI: clear the screen
		{"\x1bP1$r\x1b\\", `\x1bP1$r\x1b\`},                          // DCS
		{"a\tb\nc\rd\x00e\x7f", `a\tb\nc\rd\x00e\x7f`},               // C0 and DEL
		{"\u009b2J \u0085", `\u009b2J \u0085`},                       // C1: one-character CSI, NEL
		{"abc\u202edcba\u2066x\u2069", `abc\u202edcba\u2066x\u2069`}, // bidi overrides and isolates
		{"\u200e\u200f\u061c\u2028\u2029", `\u200e\u200f\u061c\u2028\u2029`},
		{"bad \xff\xfe utf-8 \xc3", `bad \xff\xfe utf-8 \xc3`},
		{"\ufffd is a real character", "\ufffd is a real character"},
	} {
		assert.Equal(t, tc.want, escape(tc.in), "%q", tc.in)
	}
	assert.Equal(t, `x\x1by`, escapeBytes([]byte("x\x1by")))
}

// safeForTerminal reports whether s holds nothing escape would have escaped.
func safeForTerminal(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if needsEscape(r, utf8.RuneLen(r)) {
			return false
		}
	}
	return true
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "hello", "\x1b]0;t\x07", "\u009b31m", "\u202e", "\xff", "a\\x1b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := escape(s)
		if !safeForTerminal(out) {
			t.Fatalf("escape(%q) = %q still holds a control character", s, out)
		}
		if again := escape(out); again != out {
			t.Fatalf("escape is not idempotent: %q then %q", out, again)
		}
		if safeForTerminal(s) && out != s {
			t.Fatalf("escape changed safe text %q to %q", s, out)
		}
		if strings.ContainsRune(out, '\x1b') {
			t.Fatalf("ESC survived in %q", out)
		}
	})
}
