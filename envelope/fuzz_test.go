package envelope_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// addSeeds seeds a fuzz target from the conformance fixtures (when present), from
// testdata/ and from a few hand-written edge cases.
func addSeeds(f *testing.F) {
	f.Helper()
	for _, b := range fixturePayloads(f) {
		f.Add(b)
	}
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, de := range entries {
		if de.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", de.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `{}`, `[]`, `null`, "\uFEFF{}", `{} {}`, `{"JOB":"x"}`, `{"attempts":"3"}`,
		`{"job":"\ud800","urn":" u ","data":{"a":[1.0,-0,1e400]},"meta":{"ts":1,"x":{}}}`,
		`{"job":" ","urn":"u","trace_id":"t","data":{},"meta":{"schema_version":1},"dead_letter":{"error":null}}`,
		"{\"data\":{\"s\":\"\xff\"}}", `{"a":1,"a":2,"\u0061":3}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecode checks Decode's invariants: it never panics; invalid UTF-8 is never accepted;
// it accepts nothing encoding/json rejects; data is the compacted received text; and an
// accepted body re-encodes to a fixed point that decodes to equal values.
func FuzzDecode(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		e, err := envelope.Decode(payload)
		if err != nil {
			var pe *envelope.PoisonError
			if !errors.As(err, &pe) || !errors.Is(err, envelope.ErrPoison) || pe.Detail == "" {
				t.Fatalf("decode error is not a detailed *PoisonError: %#v", err)
			}
			if !utf8.Valid(payload) && pe.Rule != envelope.RuleUTF8 {
				t.Fatalf("invalid UTF-8 reported as %s", pe.Rule)
			}
			return
		}
		if !utf8.Valid(payload) {
			t.Fatalf("invalid UTF-8 accepted: %q", payload)
		}
		if !json.Valid(payload) {
			t.Fatalf("accepted a body encoding/json rejects: %q", payload)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(payload, &members); err != nil {
			t.Fatalf("accepted a body that is not a JSON object for encoding/json: %v", err)
		}
		if raw, ok := members["data"]; ok {
			var want bytes.Buffer
			if err := json.Compact(&want, raw); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want.Bytes(), e.Data) {
				t.Fatalf("data text changed:\n got %s\nwant %s", e.Data, want.Bytes())
			}
		}
		if e.Attempts < 0 {
			t.Fatalf("negative attempts %d", e.Attempts)
		}

		out, err := e.Encode()
		if err != nil {
			t.Fatalf("an accepted body does not re-encode: %v", err)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("invalid canonical output %q", out)
		}
		back, err := envelope.Decode(out)
		if err != nil {
			t.Fatalf("re-encoded body rejected: %v\n%s", err, out)
		}
		wantJob := e.Job
		if envelope.IsBlank(wantJob) {
			wantJob = e.URN()
		}
		switch {
		case back.Job != wantJob:
			t.Fatalf("job %q, want %q", back.Job, wantJob)
		case back.URN() != e.URN():
			t.Fatalf("urn %q, want %q", back.URN(), e.URN())
		case back.TraceID != e.TraceID:
			t.Fatalf("trace_id %q, want %q", back.TraceID, e.TraceID)
		case back.Attempts != e.Attempts:
			t.Fatalf("attempts %d, want %d", back.Attempts, e.Attempts)
		case !bytes.Equal(back.Data, e.Data) && len(e.Data) > 0:
			t.Fatalf("data %s, want %s", back.Data, e.Data)
		case len(back.Warnings()) != 0:
			t.Fatalf("canonical output has forbidden keys: %v", back.Warnings())
		}
		if back.Meta.ID != e.Meta.ID || back.Meta.Queue != e.Meta.Queue || back.Meta.Lang != e.Meta.Lang ||
			back.Meta.SchemaVersion != e.Meta.SchemaVersion || back.Meta.CreatedAt != e.Meta.CreatedAt {
			t.Fatalf("meta %+v, want %+v", back.Meta, e.Meta)
		}
		if (back.DeadLetter == nil) != (e.DeadLetter == nil) {
			t.Fatalf("dead_letter presence changed")
		}
		again, err := back.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, again) {
			t.Fatalf("canonical encoding is not a fixed point:\n 1st %s\n 2nd %s", out, again)
		}
	})
}

// FuzzClassify checks that Classify is Decode plus rules 5-6: an accepted body is decodable,
// has a URN, schema version 1, object data and a trace id, and stays acceptable when
// re-encoded and retried; a Decode failure is reported with the same rule.
func FuzzClassify(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		e, err := envelope.Classify(payload)
		d, derr := envelope.Decode(payload)
		if err != nil {
			var pe *envelope.PoisonError
			if !errors.As(err, &pe) || e != nil {
				t.Fatalf("classify failure is not a *PoisonError with a nil envelope: %#v", err)
			}
			if derr != nil && err.Error() != derr.Error() {
				t.Fatalf("classify %v, decode %v", err, derr)
			}
			if derr == nil {
				switch pe.Rule {
				case envelope.RuleURN, envelope.RuleSchemaVersion, envelope.RuleData, envelope.RuleTraceID:
				default:
					t.Fatalf("decodable body refused with rule %s", pe.Rule)
				}
			}
			return
		}
		if derr != nil || d == nil {
			t.Fatalf("classify accepted what decode rejects: %v", derr)
		}
		if e.URN() == "" || e.Meta.SchemaVersion != 1 || len(e.Data) < 2 || e.Data[0] != '{' || envelope.IsBlank(e.TraceID) {
			t.Fatalf("accepted an envelope breaking rules 5-6: %+v", e)
		}
		out, err := e.WithAttempts(e.Attempts + 1).Encode()
		if err != nil {
			t.Fatal(err)
		}
		r, err := envelope.Classify(out)
		if err != nil {
			t.Fatalf("retry copy refused: %v\n%s", err, out)
		}
		if r.Attempts != max(e.Attempts+1, 0) || r.URN() != e.URN() || !bytes.Equal(r.Data, e.Data) {
			t.Fatalf("retry copy changed: %+v vs %+v", r, e)
		}
	})
}

// FuzzDecodeManyKeys builds a body with one unknown member per input byte, in the frame,
// meta or dead_letter, and checks the decoder against a model of CONTRACT §1.3: the last
// value of a key wins, in the position of the key's first occurrence, with the last
// spelling of the key; whitespace inside values is removed. Each byte picks one of 64 names
// (so lists outgrow the linear search and keys repeat), whether the key is spelled with an
// escape, and whether the value is an object with whitespace or a number.
func FuzzDecodeManyKeys(f *testing.F) {
	f.Add([]byte("abcdefghijklmnopqrstuvwxyz0123456789abc"), uint8(0))
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x00\x80\xc1\x41"), uint8(1))
	f.Add([]byte("\xff\xfe\xfd\x3f\x7f\xbf\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x3f"), uint8(2))
	f.Fuzz(func(t *testing.T, keys []byte, where uint8) {
		if len(keys) > 10_000 {
			return
		}
		type kept struct{ key, value string }
		var order []string
		last := map[string]kept{}
		var members, want strings.Builder
		for i, b := range keys {
			name := "k" + strconv.Itoa(int(b&0x3f))
			key := `"` + name + `"`
			if b&0x80 != 0 {
				key = `"\u006b` + name[1:] + `"`
			}
			value, compact := strconv.Itoa(i), strconv.Itoa(i)
			if b&0x40 != 0 {
				value, compact = "{ \"i\" :\t["+value+" ] }", `{"i":[`+compact+`]}`
			}
			members.WriteString("," + key + ":" + value)
			if _, seen := last[name]; !seen {
				order = append(order, name)
			}
			last[name] = kept{key, compact}
		}
		for _, name := range order {
			want.WriteString("," + last[name].key + ":" + last[name].value)
		}
		const head = `{"job":"urn:a:b","trace_id":"t","data":{}`
		var payload, wantIn string
		switch where % 3 {
		case 0:
			payload = head + `,"meta":{"schema_version":1}` + members.String() + `}`
			wantIn = `"attempts":0` + want.String() + `}`
		case 1:
			payload = head + `,"meta":{"schema_version":1` + members.String() + `}}`
			wantIn = `"created_at":0` + want.String() + `},"attempts":0}`
		default:
			payload = head + `,"meta":{"schema_version":1},"dead_letter":{"reason":"failed"` + members.String() + `}}`
			wantIn = `"lang":""` + want.String() + `}}`
		}
		e, err := envelope.Classify([]byte(payload))
		if err != nil {
			t.Fatalf("refused: %v\n%s", err, payload)
		}
		out, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(out), wantIn) {
			t.Fatalf("unknown members differ from the model:\n got %s\nwant …%s", out, wantIn)
		}
	})
}

// FuzzDataJSON: raw data text is either refused with ErrInvalidData by DataJSON and Make
// alike, or written by both as the same compact JSON object, which encoding/json reads.
func FuzzDataJSON(f *testing.F) {
	for _, seed := range []string{"", "{}", " {\"a\": [1, 2.50, {\"b\": null}]}\n", "[]", "null", "{\"a\":", "{\"\\u00e9\":\"\u2028\"}", "{} {}", "\xff"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		text, err := envelope.DataJSON(json.RawMessage(raw))
		e, merr := envelope.Make("urn:fuzz:data", json.RawMessage(raw))
		if err != nil {
			if !errors.Is(err, envelope.ErrInvalidData) || !errors.Is(merr, envelope.ErrInvalidData) {
				t.Fatalf("DataJSON: %v; Make: %v", err, merr)
			}
			return
		}
		if merr != nil {
			t.Fatalf("DataJSON accepted %q, Make refused it: %v", raw, merr)
		}
		if string(text) != string(e.Data) {
			t.Fatalf("DataJSON %s, Make %s", text, e.Data)
		}
		var obj map[string]any
		if err := json.Unmarshal(text, &obj); err != nil {
			t.Fatalf("DataJSON %s is not a JSON object: %v", text, err)
		}
	})
}
