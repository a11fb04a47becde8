package envelope_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

func fixedEnvelope(t *testing.T) *envelope.Envelope {
	t.Helper()
	e, err := envelope.Make("urn:babel:orders:created", json.RawMessage(`{"order_id":1042}`),
		envelope.WithQueue("orders"),
		envelope.WithTraceID("7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b"),
		envelope.WithMessageID("f1e2d3c4-b5a6-4789-90ab-cdef01234567"),
		envelope.WithCreatedAt(time.UnixMilli(1749132727000)),
	)
	require.NoError(t, err)
	return e
}

func TestEncodeCanonicalOrder(t *testing.T) {
	t.Parallel()
	out, err := fixedEnvelope(t).Encode()
	require.NoError(t, err)
	assertCanonical(t, `{"job":"urn:babel:orders:created","trace_id":"7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b",`+
		`"data":{"order_id":1042},"meta":{"id":"f1e2d3c4-b5a6-4789-90ab-cdef01234567","queue":"orders","lang":"go",`+
		`"schema_version":1,"created_at":1749132727000},"attempts":0}`, out)
}

func TestEncodeReordersReceivedFrame(t *testing.T) {
	t.Parallel()
	in := `{"x-a":1,"attempts":2,"dead_letter":{"lang":"go","z":0,"attempts":2,"original_queue":"q","failed_at":5,` +
		`"exception":null,"error":null,"reason":"poison"},"meta":{"u":true,"created_at":3,"schema_version":1,` +
		`"lang":"go","queue":"q","id":"i"},"data":{"z":1,"a":2},"trace_id":"t","urn":"urn:a","job":"urn:a","x-b":[]}`
	e, err := envelope.Classify([]byte(in))
	require.NoError(t, err)
	out, err := e.Encode()
	require.NoError(t, err)
	assertCanonical(t, `{"job":"urn:a","trace_id":"t","data":{"z":1,"a":2},"meta":{"id":"i","queue":"q","lang":"go",`+
		`"schema_version":1,"created_at":3,"u":true},"attempts":2,"dead_letter":{"reason":"poison","error":null,`+
		`"exception":null,"failed_at":5,"original_queue":"q","attempts":2,"lang":"go","z":0},"x-a":1,"urn":"urn:a","x-b":[]}`,
		out)
}

func TestEncodeURNAlias(t *testing.T) {
	t.Parallel()
	e, err := envelope.Classify([]byte(`{"urn":"urn:babel:a:b","trace_id":"t","data":{},"meta":{"schema_version":1}}`))
	require.NoError(t, err)
	out, err := e.Encode()
	require.NoError(t, err)
	assertCanonical(t, `{"job":"urn:babel:a:b","trace_id":"t","data":{},"meta":{"id":"","queue":"","lang":"",`+
		`"schema_version":1,"created_at":0},"attempts":0,"urn":"urn:babel:a:b"}`, out,
		"job is written as the resolved URN; urn is kept as received")

	e, err = envelope.Classify(readTestdata(t, "urn-blank-job.json"))
	require.NoError(t, err)
	out, err = e.Encode()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(out), `{"job":"urn:babel:orders:created",`), string(out))
	assert.True(t, strings.HasSuffix(string(out), `,"urn":"  urn:babel:orders:created  "}`), string(out))

	// An escaped urn is decoded for URN and kept verbatim for the re-encode.
	e, err = envelope.Classify([]byte(`{"urn":"urn:\u0062abel:a:b\t","trace_id":"t","data":{},"meta":{"schema_version":1}}`))
	require.NoError(t, err)
	assert.Equal(t, "urn:babel:a:b", e.URN())
	out, err = e.Encode()
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(string(out), `,"urn":"urn:\u0062abel:a:b\t"}`), string(out))
}

func TestEncodeStringEscaping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"html is not escaped", `<a href="x">&</a>`, `"<a href=\"x\">&</a>"`},
		{"line and paragraph separators", "a\u2028b\u2029c", `"a\u2028b\u2029c"`},
		{"short escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"other controls lower-case hex", "\x00\x01\x0b\x1f", `"\u0000\u0001\u000b\u001f"`},
		{"quote and backslash", `"\`, `"\"\\"`},
		{"slash and DEL raw", "/\x7f", "\"/\x7f\""},
		{"non-ASCII raw", "Café — ☕ 😀 \u00a0", "\"Café — ☕ 😀 \u00a0\""},
		{"invalid UTF-8 replaced", "a\xffb\xc3", `"a\ufffdb\ufffd"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := fixedEnvelope(t)
			e.TraceID = tt.in
			out, err := e.Encode()
			require.NoError(t, err)
			assert.Contains(t, string(out), `"trace_id":`+tt.want+`,"data"`)
			back, err := envelope.Decode(out)
			require.NoError(t, err)
			if !strings.Contains(tt.name, "invalid") {
				assert.Equal(t, tt.in, back.TraceID)
			}
		})
	}
}

func TestEncodeKeepsReceivedTextVerbatim(t *testing.T) {
	t.Parallel()
	in := readTestdata(t, "escapes.json")
	e, err := envelope.Classify(in)
	require.NoError(t, err)
	out, err := e.Encode()
	require.NoError(t, err)
	assert.Equal(t, string(in), string(out), "escapes.json is already canonical, so re-encoding is the identity")
}

func TestEncodeInvalidData(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
	}{
		{"array", `[1]`},
		{"null", `null`},
		{"malformed", `{"a":}`},
		{"NaN", `{"a":NaN}`},
		{"trailing", `{} {}`},
		{"only whitespace", `  `},
		{"invalid UTF-8", "{\"a\":\"\xff\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := fixedEnvelope(t)
			e.Data = json.RawMessage(tt.data)
			out, err := e.Encode()
			require.ErrorIs(t, err, envelope.ErrInvalidData)
			assert.Nil(t, out)
			dst := []byte("prefix")
			dst, err = e.AppendEncode(dst)
			require.ErrorIs(t, err, envelope.ErrInvalidData)
			assert.Equal(t, "prefix", string(dst), "nothing partial is appended")
		})
	}
}

func TestEncodeNormalisesData(t *testing.T) {
	t.Parallel()
	e := fixedEnvelope(t)
	e.Data = json.RawMessage(" {\n \"a\" : [ 1 , \"x y\" ] }\n")
	out, err := e.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"data":{"a":[1,"x y"]},`)

	e.Data = nil
	out, err = e.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"data":{},`)
}

func TestEncodeClampsNegativeAttempts(t *testing.T) {
	t.Parallel()
	e := fixedEnvelope(t)
	e.Attempts = -3
	out, err := e.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"attempts":0}`)
}

func TestAppendEncodeAppends(t *testing.T) {
	t.Parallel()
	e := fixedEnvelope(t)
	want, err := e.Encode()
	require.NoError(t, err)
	buf := make([]byte, 0, 512)
	buf = append(buf, "head:"...)
	buf, err = e.AppendEncode(buf)
	require.NoError(t, err)
	assert.Equal(t, "head:"+string(want), string(buf))
}

func TestEncodeMatchesEncodingJSONValues(t *testing.T) {
	t.Parallel()
	e := fixedEnvelope(t)
	e.Meta.Queue = "q<&>\u2028"
	msg, exc := "bad \"thing\"\n", "*errors.errorString"
	e.DeadLetter = &envelope.DeadLetter{Reason: envelope.ReasonFailed, Error: &msg, Exception: &exc, FailedAt: 7, OriginalQueue: "q", Attempts: 2, Lang: "go"}
	out, err := e.Encode()
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got))
	meta, ok := got["meta"].(map[string]any)
	require.True(t, ok)
	assert.Equal(t, "q<&>\u2028", meta["queue"])
	dl, ok := got["dead_letter"].(map[string]any)
	require.True(t, ok)
	assert.Equal(t, msg, dl["error"])
	assert.Equal(t, exc, dl["exception"])
}

// TestEncodeAllocatesOnce pins the allocation budget of Encode (see Performance in the
// package doc): the output is sized before it is written, so one allocation holds it,
// however long each member is (every member here is longer than the slack of that size).
func TestEncodeAllocatesOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	long := strings.Repeat("x", 200)
	in := `{"job":"urn:` + long + `","trace_id":"` + long + `","data":{"a":"` + long + `"},` +
		`"meta":{"id":"` + long + `","queue":"` + long + `","lang":"` + long + `","schema_version":1,"created_at":1,"m":"` + long + `"},` +
		`"attempts":1,"dead_letter":{"reason":"` + long + `","error":"` + long + `","exception":"` + long + `","failed_at":2,` +
		`"original_queue":"` + long + `","attempts":1,"lang":"` + long + `","d":"` + long + `"},"x":"` + long + `"}`
	e, err := envelope.Classify([]byte(in))
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := e.Encode(); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 1.0)
}
