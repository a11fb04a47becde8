package envelope

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The differential targets: the fast scanner against the general one, value by value, and
// Classify with the fast scanner against Classify with the general scanner alone, on every
// input. They stay until the general scanner is deleted (the rule), and they run in
// `make fuzz` and CI like every other Fuzz target.

// addFastSeeds seeds the targets with the canonical conformance fixtures (when present),
// this module's own suite, testdata/,
// and texts that take each branch of fastValue, valid and not.
func addFastSeeds(f *testing.F) {
	f.Helper()
	for _, dir := range []string{
		filepath.Join("..", "..", "shared", "babelqueue-conformance", "fixtures"),
		filepath.Join("..", "conformance", "testdata", "suite", "fixtures"),
		"testdata",
	} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // the conformance data is optional; testdata is checked by other tests
		}
		for _, de := range entries {
			if b, err := os.ReadFile(filepath.Join(dir, de.Name())); err == nil && !de.IsDir() {
				f.Add(b)
			}
		}
	}
	for _, s := range []string{
		`{}`, `[]`, `{ }`, `[ ]`, `{"a":1}`, `{"a" : 1 }`, "{\n\t\"a\":\r[1, 2]}", `[1,]`, `{"a":1,}`,
		`{"a"}`, `{"a":}`, `{1:2}`, `[tru]`, `[true,false,null]`, `[nul]`, `[fals]`, `[-]`, `[-0]`,
		`[01]`, `[1.]`, `[1.5e+3]`, `[1e]`, `[1E-2]`, `[-1.0]`, `[12345678901234567890]`,
		`["short"]`, `["exactly15bytes!"]`, `["sixteen-bytes-xx"]`, `["a\"b"]`, `["\u00e9"]`,
		`["\ud800"]`, "[\"caf\xc3\xa9\"]", "[\"\xff\"]", "[\"a\x01b\"]", `["unterminated`,
		`[[[[[[]]]]]]`, `[{"a":[{"b":{}}]}]`, `{"a":[1,{"b":"c"}],"d":null}`, `]`, `}`, `[}`, `{]`,
		strings.Repeat("[", fastDepth+1) + strings.Repeat("]", fastDepth+1),
		strings.Repeat("[", fastDepth) + strings.Repeat("]", fastDepth),
		`{"job":"urn:a:b","trace_id":"t","data":{"x":[1,2,{"y":"z"}]},"meta":{"schema_version":1}}`,
		`{"job":"u","trace_id":"t","data":{"x": 1},"meta":{"schema_version":1},"extra":[ 1 ]}`,
		// Whitespace in one place only, so that the flag depends on that place alone.
		`{"a" :1}`, `[1 ]`,
		// Cut by the end of the input: after a key, after the whitespace following a key or
		// a value, after a comma, in a string of eight plain bytes, in a \u escape.
		`{"a"`, `{"a" `, `[1 `, `[1,`, `"abcdefgh`, `"\u12`,
		// Numbers ending the input, in each part; a 9 past an exponent's first digit.
		`-12`, `1.5`, `1e`, `1e5`, `1e19`,
		`{"a" x1}`, // no colon after the key
		// Bytes that only the general UTF-8 check refuses: a lead byte below C2 (overlong),
		// an encoded surrogate, E0 (a three-byte lead) with one continuation byte.
		"[\"\xc0\xaf\"]", "[\"\xed\xa0\x80\"]", "[\"\xe0\xa0\"]",
	} {
		f.Add([]byte(s))
	}
	for _, v := range canonicalVariants() {
		f.Add([]byte(v.payload))
	}
}

// canonicalVariant is a payload of the canonical shape (canonical.go), or one step away from
// it, and whether the canonical path takes it (it may still be refused later, by rules 5–6).
type canonicalVariant struct {
	payload   string
	canonical bool
}

// canonicalVariants are payloads that the canonical path must decide as the general path
// does.
func canonicalVariants() []canonicalVariant {
	const body = `{"job":"urn:babel:orders:created","trace_id":"18ffe3ee-bab3-459b-8f89-5a909ea520ca",` +
		`"data":{"order_id":1042},"meta":{"id":"655cfeb2-e4b8-4160-aca5-cd939678f912","queue":"orders",` +
		`"lang":"go","schema_version":1,"created_at":1796537910043},"attempts":0}`
	const meta = `"meta":{"id":"655cfeb2-e4b8-4160-aca5-cd939678f912","queue":"orders","lang":"go","schema_version":1,"created_at":1796537910043}`
	r := func(old, repl string) string { return strings.Replace(body, old, repl, 1) }
	return []canonicalVariant{
		{body, true},
		{r(`"queue":"orders",`, ``), true},                                    // an optional member absent
		{r(`,"attempts":0`, ``), true},                                        // the last member absent
		{r(`"job":"urn:babel:orders:created",`, ``), true},                    // the job absent: rule 5
		{r(`"schema_version":1,`, ``), true},                                  // no schema version: rule 5
		{r(`"trace_id":"18ffe3ee`, `"trace_id":"18ffe3ee\u0041`), true},       // an escape in a string
		{r(`"data":{"order_id":1042}`, `"data":{ "order_id" : 1042 }`), true}, // whitespace inside data
		{r(`"attempts":0`, `"attempts":-3`), true},
		{`{"job":"u"}`, true},
		{`{"meta":{"id":"x"}}`, true},
		{"{\"job\":\"caf\xc3\xa9\"}", true},
		{r(`"meta":{`, `"meta": {`), false},                      // whitespace
		{body + " ", false},                                      // trailing whitespace
		{body + "x", false},                                      // trailing bytes
		{r(`"attempts":0`, `"attempts":0,"attempts":2`), false},  // a repeated key
		{r(`"attempts":0`, `"attempts":0,"extra":true`), false},  // an unknown key
		{r(`"attempts":0`, `"attempts":0,"timestamp":1`), false}, // a forbidden key
		{r(`"job":`, `"urn":"urn:x:y","job":`), false},           // urn
		{r(`"data":{"order_id":1042}`, `"data":[1]`), false},     // data not an object
		{r(`"attempts":0`, `"attempts":"0"`), false},             // a value of the wrong type
		{r(`"created_at":1796537910043`, `"created_at":1.5`), false},
		{r(`"meta":{"id"`, `"meta":{"lang":"py","id"`), false}, // meta out of order
		{r(meta, `"meta":{}`), false},                          // an empty object
		{r(`"trace_id":`, `"data":{},"trace_id":`), false},     // data twice, out of order
		{r(`}`, ``), false},                                    // cut short
		{body[:len(body)-1], false},
		{`{}`, false},
		{`{"job":`, false},
		{`{"job":"u","data":`, false}, // cut short after a key's colon
		{`{"job":"u","meta":`, false},
		{"{\"job\":\"\xff\"}", false},
	}
}

// FuzzFastScanAgrees: where fastValue accepts a value, the general scanner accepts it too,
// ending at the same offset with the same whitespace flag; and scanValue, fast path and
// all, returns exactly what the general scanner returns (the same error included), at
// every depth the decoder uses.
func FuzzFastScanAgrees(f *testing.F) {
	addFastSeeds(f)
	f.Fuzz(func(t *testing.T, s []byte) {
		i := skipWS(s, 0)
		for _, depth := range []int{0, 1, 2, maxDepth - 3} {
			end, ws, ok := fastValue(s, i, depth)
			sEnd, sWS, sErr := slowValue(s, i, depth)
			if ok && (sErr != nil || end != sEnd || ws != sWS) {
				t.Fatalf("depth %d: fastValue accepted %q up to %d (ws %v); the general scanner: end %d, ws %v, error %v",
					depth, s, end, ws, sEnd, sWS, sErr)
			}
			gEnd, gWS, gErr := scanValue(s, i, depth)
			if gEnd != sEnd || gWS != sWS || !reflect.DeepEqual(gErr, sErr) {
				t.Fatalf("depth %d: scanValue(%q) = %d, %v, %v; the general scanner: %d, %v, %v",
					depth, s, gEnd, gWS, gErr, sEnd, sWS, sErr)
			}
		}
	})
}

// FuzzClassifyFastPathAgrees: Classify and Decode give the same verdict, the same error
// and the same envelope with the fast scanner as with the general scanner alone.
func FuzzClassifyFastPathAgrees(f *testing.F) {
	addFastSeeds(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, fn := range []struct {
			name string
			run  func([]byte, bool) (*Envelope, error)
		}{{"Classify", classify}, {"Decode", decode}} {
			fast, fastErr := fn.run(payload, false)
			slow, slowErr := fn.run(payload, true)
			if !samePoison(fastErr, slowErr) {
				t.Fatalf("%s(%q): error %v with the fast scanner, %v without", fn.name, payload, fastErr, slowErr)
			}
			if !sameEnvelope(fast, slow) {
				t.Fatalf("%s(%q): envelope\n%+v\nwith the fast scanner,\n%+v\nwithout", fn.name, payload, fast, slow)
			}
		}
	})
}

// sameEnvelope compares two decoded envelopes member by member, unknown members and
// warnings included, and their encodings.
func sameEnvelope(a, b *Envelope) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if !reflect.DeepEqual(*a, *b) {
		return false
	}
	ea, errA := a.Encode()
	eb, errB := b.Encode()
	return bytes.Equal(ea, eb) && samePoison(errA, errB)
}

// samePoison reports whether two errors of Decode, Classify or Encode are both nil, or say
// the same thing: the same *PoisonError (rule, pointer, detail), or the same text.
func samePoison(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var pa, pb *PoisonError
	if errors.As(a, &pa) != errors.As(b, &pb) {
		return false
	}
	if pa != nil && *pa != *pb {
		return false
	}
	return a.Error() == b.Error()
}

// The fast scanner decides the values it is built for on its own, so that the speed-up is
// not an accident of the fallback: a compact nested object, an indented one, and a string
// right at the end of the input (which goes to scanString, not the two-word read).
func TestFastValueDecidesCommonText(t *testing.T) {
	nested, err := os.ReadFile(filepath.Join("testdata", "nested-4k.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		text string
		ws   bool
	}{
		{"nested-4k", string(nested), false},
		{"indented", "{\n  \"a\": [1, 2.5, -3e2],\n  \"b\": {\"c\": null, \"d\": true, \"e\": false}\n}", true},
		{"string at the end", `"abc"`, false},
		{"escapes and UTF-8", `{"a":"x\"y","b":"naïve café — İstanbul","c":"line\nbreak"}`, false},
	} {
		end, ws, ok := fastValue([]byte(tc.text), 0, 1)
		if !ok || end != len(tc.text) || ws != tc.ws {
			t.Errorf("%s: fastValue = %d, ws %v, ok %v; want %d, ws %v, ok", tc.name, end, ws, ok, len(tc.text), tc.ws)
		}
	}
	for _, bad := range []string{`[1,]`, `{"a":1,}`, `[01]`, `["a` + "\x01" + `"]`, `{"a" 1}`, `tru`, ``} {
		if _, _, ok := fastValue([]byte(bad), 0, 1); ok {
			t.Errorf("fastValue accepted %q", bad)
		}
	}
	deep := strings.Repeat("[", fastDepth+1) + strings.Repeat("]", fastDepth+1)
	if _, _, ok := fastValue([]byte(deep), 0, 0); ok {
		t.Errorf("fastValue accepted %d levels of nesting; it tracks %d", fastDepth+1, fastDepth)
	}
	if _, _, ok := fastValue([]byte(`[[]]`), 0, maxDepth-1); ok {
		t.Errorf("fastValue accepted nesting past maxDepth")
	}
}

// TestFastValueReadsOnlyItsInput: fastValue reads nothing past len(s), even where the
// buffer behind s goes on (a payload cut from a longer buffer): a literal cut by the end of
// the input is not completed from the bytes beyond it.
func TestFastValueReadsOnlyItsInput(t *testing.T) {
	for _, lit := range []string{"true", "false", "null"} {
		buf := []byte("[" + lit + "]")
		s := buf[:len(lit)] // '[' and the literal without its last byte
		if end, _, ok := fastValue(s, 1, 1); ok {
			t.Errorf("fastValue accepted %q from byte 1 up to %d, past its end", s, end)
		}
	}
}

// BenchmarkClassifyScanner runs Classify with the fast scanner and with the general scanner
// alone on the same bodies, so that one run (with -count for repeats) gives the ratio.
func BenchmarkClassifyScanner(b *testing.B) {
	nested, err := os.ReadFile(filepath.Join("testdata", "nested-4k.json"))
	if err != nil {
		b.Fatal(err)
	}
	compact := []byte(`{"job":"urn:babel:orders:created","trace_id":"7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b",` +
		`"data":{"order_id":1042},"meta":{"id":"f1e2d3c4-b5a6-4789-90ab-cdef01234567","queue":"orders",` +
		`"lang":"php","schema_version":1,"created_at":1749132727000},"attempts":0}`)
	for _, p := range []struct {
		name    string
		payload []byte
	}{{"order-created-compact", compact}, {"nested-4k", nested}} {
		for _, mode := range []struct {
			name string
			slow bool
		}{{"fast", false}, {"general", true}} {
			b.Run(p.name+"/"+mode.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(p.payload)))
				for b.Loop() {
					if _, err := classify(p.payload, mode.slow); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestCanonicalPathAgrees: every canonical variant is decided by Classify and Decode as the
// general path decides it (the general scanner alone), verdict, error and envelope; the
// ones of the canonical shape take the canonical path, and the others do not, having left
// the decoder as it was made.
func TestCanonicalPathAgrees(t *testing.T) {
	for _, v := range canonicalVariants() {
		payload := v.payload
		for _, fn := range []struct {
			name string
			run  func([]byte, bool) (*Envelope, error)
		}{{"Classify", classify}, {"Decode", decode}} {
			fast, fastErr := fn.run([]byte(payload), false)
			slow, slowErr := fn.run([]byte(payload), true)
			if !samePoison(fastErr, slowErr) {
				t.Errorf("%s(%q): error %v on the canonical path, %v on the general", fn.name, payload, fastErr, slowErr)
			}
			if !sameEnvelope(fast, slow) {
				t.Errorf("%s(%q): envelope\n%+v\non the canonical path,\n%+v\non the general", fn.name, payload, fast, slow)
			}
		}
		d := decoder{s: []byte(payload)}
		took := d.canonical()
		if took != v.canonical {
			t.Errorf("canonical(%q) = %v, want %v", payload, took, v.canonical)
		}
		if !took && !reflect.DeepEqual(d, decoder{s: []byte(payload)}) {
			t.Errorf("canonical(%q) refused it but left the decoder changed: %+v", payload, d)
		}
	}
}

// TestCanonicalKeys: the canonical path knows the key of each member of the encoders' order
// (canonicalFirst and canonicalNext, the frame's and meta's, up to dead_letter), byte for
// byte and in that order, each member optional: a body with every member takes it, and so
// does one without any single member; one with a byte of a key changed, or two members
// swapped, does not. The names come from knownNames, so the keys written in canonicalObject
// are checked against the names the general path knows, and their order against the order
// the general path tries first.
func TestCanonicalKeys(t *testing.T) {
	values := map[memberID]string{
		memberJob: `"urn:babel:orders:created"`, memberTraceID: `"t-1"`, memberData: `{"a":1}`,
		memberAttempts: `2`, memberMetaID: `"m-1"`, memberMetaQueue: `"orders"`, memberMetaLang: `"go"`,
		memberMetaSchemaVersion: `1`, memberMetaCreatedAt: `1749132727000`,
	}
	type member struct{ key, value string }
	order := func(lvl level) []member {
		var ms []member
		for id := canonicalFirst[lvl]; id != memberUnknown && id != memberDeadLetter; id = canonicalNext[id] {
			name := ""
			for _, n := range knownNames[lvl] {
				if memberNamed(lvl, n) == id {
					name = n
				}
			}
			if name == "" {
				t.Fatalf("level %d: member %d of the encoders' order has no name", lvl, id)
			}
			ms = append(ms, member{`"` + name + `":`, values[id]})
		}
		return ms
	}
	object := func(ms []member) string {
		var b strings.Builder
		b.WriteByte('{')
		for k, m := range ms {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(m.key + m.value)
		}
		return b.String() + "}"
	}
	metaMembers, top := order(levelMeta), order(levelTop)
	withMeta := func(meta []member) []member {
		body := slices.Clone(top)
		for k := range body {
			if body[k].key == `"meta":` {
				body[k].value = object(meta)
			}
		}
		return body
	}
	top = withMeta(metaMembers)
	// bodies edits meta's members (in a whole frame), then the frame's.
	bodies := func(edit func([]member) [][]member) (out []string) {
		for _, ms := range edit(metaMembers) {
			out = append(out, object(withMeta(ms)))
		}
		for _, ms := range edit(top) {
			out = append(out, object(ms))
		}
		return out
	}
	took := func(body string) bool {
		d := decoder{s: []byte(body)}
		return d.canonical()
	}
	whole := bodies(func(ms []member) [][]member { return [][]member{ms} })
	for _, body := range whole {
		if !took(body) {
			t.Errorf("the canonical path refused %s", body)
		}
	}
	without := bodies(func(ms []member) (out [][]member) {
		for k := range ms {
			out = append(out, slices.Delete(slices.Clone(ms), k, k+1))
		}
		return out
	})
	for _, body := range without {
		if !took(body) {
			t.Errorf("the canonical path refused %s, a member left out", body)
		}
	}
	var refused []string
	refused = append(refused, bodies(func(ms []member) (out [][]member) {
		for k := range ms {
			for j := range ms[k].key {
				for _, c := range []byte{'x', ms[k].key[j] ^ 0x20, 0} {
					if c != ms[k].key[j] {
						changed := slices.Clone(ms)
						key := []byte(ms[k].key)
						key[j] = c
						changed[k].key = string(key)
						out = append(out, changed)
					}
				}
			}
		}
		return out
	})...)
	refused = append(refused, bodies(func(ms []member) (out [][]member) {
		for k := 0; k+1 < len(ms); k++ {
			swapped := slices.Clone(ms)
			swapped[k], swapped[k+1] = swapped[k+1], swapped[k]
			out = append(out, swapped)
		}
		return out
	})...)
	for _, body := range refused {
		if took(body) {
			t.Errorf("the canonical path took %s", body)
		}
	}
}
