package envelope

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// appendString writes what encoding/json writes for a string with HTML escaping off
// (lower-case \u00xx, \b and \f, \u2028 and \u2029, \ufffd for an invalid byte), whatever
// the position of the special byte within the eight bytes the fast path skips at a time.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{
		"", "a", "plain-ascii-uuid-7b3f9c2a-e41d-4f88", `quote"`, `back\slash`, "tab\there",
		"\x00\x01\x1f", "\u2028\u2029", "héllo wörld", "\xff\xfe", "<&>", "日本語のテキスト",
	} {
		f.Add(s)
	}
	for _, special := range []string{`"`, `\`, "\n", "\x7f", "é", "\xff", "\u2028"} {
		for pos := range 17 {
			f.Add(strings.Repeat("x", pos) + special + strings.Repeat("y", 9))
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		got := appendString(nil, s)
		if w := bytes.TrimSuffix(want.Bytes(), []byte("\n")); !bytes.Equal(got, w) {
			t.Fatalf("appendString(%q) = %s, encoding/json writes %s", s, got, w)
		}
	})
}
