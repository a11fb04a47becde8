package envelope_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// unknownKeysBody is an acceptable body with n unknown top-level keys "x0", "x1", … after
// the known members (about 15 bytes per key).
func unknownKeysBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(minimal)
	for i := range n {
		b.WriteString(`,"x`)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`":`)
		b.WriteString(strconv.Itoa(i))
	}
	b.WriteByte('}')
	return b.Bytes()
}

func TestDecodeManyUnknownKeysKeepOrderAndLastWins(t *testing.T) {
	t.Parallel()
	// More keys than the linear search handles, then duplicates of early and late keys in
	// every decoded object: the index must find them.
	var top, meta, dl strings.Builder
	for i := range 40 {
		top.WriteString(`,"t` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
		meta.WriteString(`,"m` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
		dl.WriteString(`,"d` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	payload := []byte(`{"job":"urn:a:b","trace_id":"t","data":{}` + top.String() +
		`,"meta":{"schema_version":1` + meta.String() + `,"m0":"last","\u006d39":"escaped"}` +
		`,"dead_letter":{"reason":"failed"` + dl.String() + `,"d1":[1]}` +
		`,"t0":"last","t39":{"a" : 1}}`)
	e, err := envelope.Classify(payload)
	require.NoError(t, err)
	out, err := e.Encode()
	require.NoError(t, err)
	s := string(out)
	assert.Contains(t, s, `"created_at":0,"m0":"last","m1":1,`)
	assert.Contains(t, s, `,"m38":38,"\u006d39":"escaped"},"attempts":0`)
	assert.Contains(t, s, `"lang":"","d0":0,"d1":[1],"d2":2,`)
	assert.Contains(t, s, `,"d39":39},"t0":"last","t1":1,`)
	assert.True(t, strings.HasSuffix(s, `,"t38":38,"t39":{"a":1}}`), s)
	for _, key := range []string{`"t0":`, `"t39":`, `"m0":`, `"d1":`} {
		assert.Equal(t, 1, strings.Count(s, key), "%s is written once", key)
	}
	assert.Equal(t, 0, strings.Count(s, `"m39":`), "the last spelling of a key is kept")
}

func TestDecodeMemberCap(t *testing.T) {
	t.Parallel()
	// The frame has 4 known members (job, trace_id, data, meta).
	atCap := unknownKeysBody(envelope.MaxMembers - 4)
	_, err := envelope.Classify(atCap)
	require.NoError(t, err, "exactly MaxMembers members are accepted")

	_, err = envelope.Classify(unknownKeysBody(envelope.MaxMembers - 3))
	requirePoison(t, err, envelope.RuleMembers, "")
	assert.Contains(t, err.Error(), "the envelope has more than 250000 members")

	// Duplicates count: the cap bounds the work, not only the memory.
	var b bytes.Buffer
	b.WriteString(`{"job":"urn:a:b","trace_id":"t","data":{},"meta":{"schema_version":1`)
	for range envelope.MaxMembers {
		b.WriteString(`,"x":1`)
	}
	b.WriteString(`}}`)
	_, err = envelope.Decode(b.Bytes())
	requirePoison(t, err, envelope.RuleMembers, "/meta")
	assert.Contains(t, err.Error(), "meta has more than")
}

func TestDecodeDataIsCappedSubSlice(t *testing.T) {
	t.Parallel()
	e, err := envelope.Decode(body(`,"data":{ "a" : [1, 2] },"x-after":"kept"`))
	require.NoError(t, err)
	assert.True(t, bytes.Equal([]byte(`{"a":[1,2]}`), e.Data), "whitespace removed in place: %s", e.Data)
	assert.Equal(t, len(e.Data), cap(e.Data), "appending to Data reallocates")
	want, err := e.Encode()
	require.NoError(t, err)

	e.Data = append(e.Data, ' ') // must not overwrite the text after data
	e.Data = e.Data[:len(e.Data)-1]
	e.Data[2] = 'b' // nor may writing Data change any decoded string
	got, err := e.Encode()
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(string(want), `{"a"`, `{"b"`, 1), string(got))
}

// TestClassifyAllocatesOnce pins the allocation budget of a typical small body: the
// envelope and its copy of the payload share one allocation, data and the strings point
// into it, and whitespace is removed in place.
func TestClassifyAllocatesOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	payload := []byte(`{
  "job": "urn:babel:orders:created",
  "trace_id": "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b",
  "data": {
    "order_id": 1042
  },
  "meta": {
    "id": "f1e2d3c4-b5a6-4789-90ab-cdef01234567",
    "queue": "orders",
    "lang": "php",
    "schema_version": 1,
    "created_at": 1749132727000
  },
  "attempts": 0
}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := envelope.Classify(payload); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 1.0)
}
