package envelope

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"unicode/utf8"
)

// TestSpecialBytesLowestIsExact checks, for words built from bytes that matter to the
// string scan, that the lowest byte specialBytes flags is the first byte that is not plain.
func TestSpecialBytesLowestIsExact(t *testing.T) {
	t.Parallel()
	interesting := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '#', '[', '\\', ']', 'a', 0x7e, 0x7f, 0x80, 0x9f, 0xa0, 0xa2, 0xdc, 0xff}
	check := func(w [8]byte) {
		want := 8
		for k, c := range w {
			if !plain(c) {
				want = k
				break
			}
		}
		m := specialBytes(binary.LittleEndian.Uint64(w[:]))
		got := 8
		for k := range 8 {
			if m>>(8*k+7)&1 == 1 {
				got = k
				break
			}
		}
		if got != want {
			t.Fatalf("specialBytes(% x): lowest flagged byte %d, want %d", w, got, want)
		}
	}
	// Every byte value at every position, after plain bytes and before interesting ones.
	for pos := range 8 {
		for c := range 256 {
			for _, after := range interesting {
				w := [8]byte{'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a'}
				w[pos] = byte(c)
				for k := pos + 1; k < 8; k++ {
					w[k] = after
				}
				check(w)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		var w [8]byte
		for k := range w {
			w[k] = interesting[r.IntN(len(interesting))]
		}
		check(w)
	}
}

// TestRuneLenMatchesUTF8 checks runeLen against unicode/utf8 for every sequence of up to
// three bytes that starts above ASCII, and for four-byte sequences over the boundary bytes.
func TestRuneLenMatchesUTF8(t *testing.T) {
	t.Parallel()
	want := func(b []byte) int {
		if r, n := utf8.DecodeRune(b); r != utf8.RuneError || n != 1 {
			return n
		}
		return 0
	}
	for c0 := 0x80; c0 < 0x100; c0++ {
		for c1 := range 0x100 {
			b := []byte{byte(c0), byte(c1)}
			if got := runeLen(b, 0); got != want(b) {
				t.Fatalf("runeLen(% x) = %d, want %d", b, got, want(b))
			}
			for c2 := range 0x100 {
				b := []byte{byte(c0), byte(c1), byte(c2)}
				if got := runeLen(b, 0); got != want(b) {
					t.Fatalf("runeLen(% x) = %d, want %d", b, got, want(b))
				}
			}
		}
	}
	edges := []byte{0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff}
	for c0 := 0xf0; c0 < 0x100; c0++ {
		for _, c1 := range edges {
			for _, c2 := range edges {
				for _, c3 := range edges {
					b := []byte{byte(c0), c1, c2, c3}
					if got := runeLen(b, 0); got != want(b) {
						t.Fatalf("runeLen(% x) = %d, want %d", b, got, want(b))
					}
				}
			}
		}
	}
}

// TestPlainKeyMatchesMemberNamed checks that the fast key path recognises exactly the known
// keys of each level, spelled plainly and followed by their closing quote, whichever member
// of the level (or none) is the hint of the encoders' order.
func TestPlainKeyMatchesMemberNamed(t *testing.T) {
	t.Parallel()
	const pad = `:0,"________________"}`
	for lvl, names := range knownNames {
		lvl := level(lvl)
		hints := []memberID{memberUnknown}
		for _, name := range names {
			hints = append(hints, memberNamed(lvl, name))
		}
		for _, name := range names {
			id := memberNamed(lvl, name)
			if id == memberUnknown {
				t.Fatalf("level %d: %q is listed but unknown to memberNamed", lvl, name)
			}
			for _, hint := range hints {
				s := []byte(`"` + name + `"` + pad)
				if got, end := plainKey(lvl, s, 0, hint); got != id || end != len(name)+2 {
					t.Errorf("level %d, hint %d: plainKey(%q) = %d, %d, want %d, %d", lvl, hint, name, got, end, id, len(name)+2)
				}
				for _, other := range []string{name + "x", name[:len(name)-1], "X" + name[1:], name + `\"`} {
					s := []byte(`"` + other + `"` + pad)
					if got, _ := plainKey(lvl, s, 0, hint); got != memberUnknown && memberNamed(lvl, other) != got {
						t.Errorf("level %d, hint %d: plainKey(%q) = %d, want %d", lvl, hint, other, got, memberNamed(lvl, other))
					}
				}
			}
		}
	}
	// The encoders' order stays within each level.
	for lvl := range knownNames {
		for id := canonicalFirst[lvl]; id != memberUnknown; id = canonicalNext[id] {
			if !slices.Contains(knownNames[lvl], keyName(plainByID[id])) {
				t.Errorf("level %d: the encoders' order names member %d, not of the level", lvl, id)
			}
		}
	}
}

// keyName returns the name of a known key, from its text.
func keyName(k plainKeyText) string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], k.w0)
	binary.LittleEndian.PutUint64(b[8:], k.w1)
	return string(b[:k.n-1])
}

// checkInteger compares the integer members' decoding of the value at the start of s, the
// fast path included, with the full path's: scanNumber, then parseInt.
func checkInteger(t *testing.T, s []byte) {
	t.Helper()
	for _, asInt := range []bool{false, true} {
		d := decoder{s: s}
		n, end, err := d.integer(0, "/attempts", asInt)
		want, ok, wantEnd := int64(0), false, -1
		// scanNumber's precondition; integer must refuse any other text.
		numeric := len(s) > 0 && (s[0] == '-' || s[0] >= '0' && s[0] <= '9')
		if numeric {
			if end2, isInt, serr := scanNumber(s, 0); serr == nil && isInt {
				want, ok = parseInt(string(s[:end2]))
				if ok && asInt {
					ok = int64(int(want)) == want
				}
				wantEnd = end2
			}
		}
		if ok != (err == nil) || (ok && (n != want || end != wantEnd)) {
			t.Fatalf("integer(%q, asInt %v) = %d, %d, %v; want %d, end %d, ok %v", s, asInt, n, end, err, want, wantEnd, ok)
		}
	}
}

// TestIntegerFastPathMatchesFullPath checks the integer members against parseInt for
// tokens around the lengths where the fast path hands over, and for every length of up to
// 21 digits, signed or not, with a leading zero or not, followed by a fraction, an exponent
// or another byte, cut after 0 to 9 of the bytes that follow: the number ends at the end of
// the input as well as inside it, where the fast path must stop and hand over.
func TestIntegerFastPathMatchesFullPath(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{
		"0", "-0", "7", "-7", "10", "01", "-01", "00", "123456789012345678", "-123456789012345678",
		"999999999999999999", "1234567890123456789", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "1.5", "1e3", "1E3", "-", "12x",
	} {
		checkInteger(t, []byte(tok+","))
		checkInteger(t, []byte(tok))
	}
	const digits = "9876543210123456789012"
	for _, sign := range []string{"", "-"} {
		for n := 1; n <= 21; n++ {
			for _, lead := range []string{"", "0"} {
				for tail := range 10 {
					for _, next := range []string{"}", ".5}", "e1}", "/}", ":}"} {
						s := sign + lead + digits[:n] + (next + ",\"attempts\":0}")[:min(tail, len(next)+14)]
						checkInteger(t, []byte(s))
					}
				}
			}
		}
	}
}

// TestParseIntMatchesStrconv holds parseInt to strconv.ParseInt (checkInteger holds the
// integer members to parseInt) around the bounds of int64, where its unchecked loop of 18
// digits hands over to the checked one: 18, 19 and 20 digits, and every last digit after
// the largest prefix, signed and not.
func TestParseIntMatchesStrconv(t *testing.T) {
	t.Parallel()
	toks := []string{"0", "999999999999999999", "9999999999999999999", "99999999999999999999"}
	for d := '0'; d <= '9'; d++ {
		toks = append(toks, "922337203685477580"+string(d))
	}
	for _, tok := range toks {
		for _, s := range []string{tok, "-" + tok} {
			want, err := strconv.ParseInt(s, 10, 64)
			if got, ok := parseInt(s); ok != (err == nil) || ok && got != want {
				t.Errorf("parseInt(%q) = %d, %v; strconv.ParseInt: %d, %v", s, got, ok, want, err)
			}
		}
	}
}

// FuzzIntegerFastPathMatchesFullPath: the integer members decode any text as the full path
// does (see checkInteger).
func FuzzIntegerFastPathMatchesFullPath(f *testing.F) {
	for _, s := range []string{"", "x", "1749132727000}", "0}", "-12345678901234567,", "123456789", "12345678x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) { checkInteger(t, s) })
}
