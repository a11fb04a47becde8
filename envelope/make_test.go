package envelope_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

func TestMakeDefaults(t *testing.T) {
	t.Parallel()
	before := time.Now().UnixMilli()
	e, err := envelope.Make("urn:babel:orders:created", nil)
	require.NoError(t, err)
	after := time.Now().UnixMilli()

	assert.Equal(t, "urn:babel:orders:created", e.Job)
	assert.Equal(t, "urn:babel:orders:created", e.URN())
	assert.JSONEq(t, `{}`, string(e.Data))
	assert.Equal(t, 0, e.Attempts)
	assert.Nil(t, e.DeadLetter)
	assert.Empty(t, e.Warnings())
	assert.Equal(t, "go", e.Meta.Lang)
	assert.Equal(t, 1, e.Meta.SchemaVersion)
	assert.Empty(t, e.Meta.Queue)
	assert.GreaterOrEqual(t, e.Meta.CreatedAt, before)
	assert.LessOrEqual(t, e.Meta.CreatedAt, after)
	for _, id := range []string{e.TraceID, e.Meta.ID} {
		u, err := uuid.Parse(id)
		require.NoError(t, err)
		assert.Equal(t, uuid.Version(4), u.Version())
		assert.Equal(t, uuid.RFC4122, u.Variant())
	}
	assert.NotEqual(t, e.TraceID, e.Meta.ID)

	other, err := envelope.Make("urn:babel:orders:created", nil)
	require.NoError(t, err)
	assert.NotEqual(t, e.Meta.ID, other.Meta.ID)
	assert.NotEqual(t, e.TraceID, other.TraceID)

	out, err := e.Encode()
	require.NoError(t, err)
	back, err := envelope.Classify(out)
	require.NoError(t, err, "a made envelope is acceptable")
	assert.Equal(t, e.Meta, back.Meta)
}

func TestMakeOptions(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 6, 5, 14, 12, 7, 999_999_999, time.UTC)
	e, err := envelope.Make(" \turn:a:b\n", nil,
		envelope.WithQueue("orders"), envelope.WithTraceID("trace-1"),
		envelope.WithMessageID("msg-1"), envelope.WithCreatedAt(at))
	require.NoError(t, err)
	assert.Equal(t, "urn:a:b", e.Job, "blank trimmed at both ends")
	assert.Equal(t, "orders", e.Meta.Queue)
	assert.Equal(t, "trace-1", e.TraceID)
	assert.Equal(t, "msg-1", e.Meta.ID)
	assert.Equal(t, at.Truncate(time.Millisecond).UnixMilli(), e.Meta.CreatedAt)
	assert.Equal(t, int64(1749132727999), e.Meta.CreatedAt)

	e, err = envelope.Make("urn:a:b", nil, envelope.WithCreatedAt(time.Time{}))
	require.NoError(t, err)
	assert.InDelta(t, time.Now().UnixMilli(), e.Meta.CreatedAt, float64(time.Minute.Milliseconds()), "zero means now")
}

type order struct {
	ID    int64   `json:"id"`
	Note  string  `json:"note"`
	Price float64 `json:"price"`
}

func TestMakeData(t *testing.T) {
	t.Parallel()
	var nilMap map[string]any
	var nilOrder *order
	tests := []struct {
		name string
		data any
		want string
	}{
		{"nil", nil, `{}`},
		{"nil map", nilMap, `{}`},
		{"nil pointer", nilOrder, `{}`},
		{"empty map", map[string]any{}, `{}`},
		{"empty raw", json.RawMessage(nil), `{}`},
		{"raw kept and compacted", json.RawMessage(" {\"b\": 1.0, \"a\" : 9007199254740993}\n"), `{"b":1.0,"a":9007199254740993}`},
		{"raw compacted around escapes", json.RawMessage(`{"a": "x\" y\\", "b" : 1}`), `{"a":"x\" y\\","b":1}`},
		{"bytes are raw JSON", []byte(`{"x":"<&>"}`), `{"x":"<&>"}`},
		{"map sorted, no HTML escaping", map[string]any{"z": "<b>&", "a": 1}, `{"a":1,"z":"<b>&"}`},
		{"struct", order{ID: 9007199254740993, Note: "\u2028", Price: 1}, `{"id":9007199254740993,"note":"\u2028","price":1}`},
		{"struct pointer", &order{ID: 1}, `{"id":1,"note":"","price":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := envelope.Make("urn:a:b", tt.data)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(e.Data))
			text, err := envelope.DataJSON(tt.data)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(text), "DataJSON writes what Make writes")
		})
	}
}

// TestMakeAllocatesTwice pins the allocation budget of a publish (see Performance in the
// package doc): Make with map data (a nested map and slice, which the package's own
// encoder writes, not encoding/json) and AppendEncode into a reused buffer allocate the
// envelope and the caller's option value only.
func TestMakeAllocatesTwice(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = makeAndEncode(buf, orderMap); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 2.0)
}

func TestMakeCopiesRawData(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"a":1}`)
	e, err := envelope.Make("urn:a:b", raw)
	require.NoError(t, err)
	raw[5] = '2'
	assert.Equal(t, `{"a":1}`, string(e.Data))
}

func TestMakeErrors(t *testing.T) {
	t.Parallel()
	// Values that contain themselves: the package's encoder hands them to encoding/json,
	// which refuses the cycle, instead of following them for ever.
	cyclicMap := map[string]any{}
	cyclicMap["self"] = cyclicMap
	cyclicSlice := []any{nil}
	cyclicSlice[0] = cyclicSlice
	tests := []struct {
		name string
		urn  string
		data any
		opts []envelope.MakeOption
		want error
	}{
		{"empty urn", "", nil, nil, envelope.ErrInvalidURN},
		{"blank urn", " \t\r\n\v\f", nil, nil, envelope.ErrInvalidURN},
		{"invalid UTF-8 urn", "urn:\xff", nil, nil, envelope.ErrInvalidURN},
		{"array data", "u", []int{1}, nil, envelope.ErrInvalidData},
		{"string data", "u", "x", nil, envelope.ErrInvalidData},
		{"raw array", "u", json.RawMessage(`[]`), nil, envelope.ErrInvalidData},
		{"raw null", "u", json.RawMessage(`null`), nil, envelope.ErrInvalidData},
		{"raw malformed", "u", []byte(`{"a":`), nil, envelope.ErrInvalidData},
		{"NaN", "u", map[string]float64{"x": math.NaN()}, nil, envelope.ErrInvalidData},
		{"Inf", "u", map[string]float64{"x": math.Inf(1)}, nil, envelope.ErrInvalidData},
		{"channel", "u", map[string]any{"c": make(chan int)}, nil, envelope.ErrInvalidData},
		{"cyclic map", "u", cyclicMap, nil, envelope.ErrInvalidData},
		{"cyclic slice", "u", map[string]any{"list": cyclicSlice}, nil, envelope.ErrInvalidData},
		{"blank trace id", "u", nil, []envelope.MakeOption{envelope.WithTraceID(" ")}, envelope.ErrInvalidOption},
		{"blank message id", "u", nil, []envelope.MakeOption{envelope.WithMessageID("")}, envelope.ErrInvalidOption},
		// Not blank, so only the UTF-8 rule refuses these.
		{"invalid UTF-8 trace id", "u", nil, []envelope.MakeOption{envelope.WithTraceID("trace-\xff")}, envelope.ErrInvalidOption},
		{"invalid UTF-8 message id", "u", nil, []envelope.MakeOption{envelope.WithMessageID("id-\xc3")}, envelope.ErrInvalidOption},
		{"invalid queue", "u", nil, []envelope.MakeOption{envelope.WithQueue("\xff")}, envelope.ErrInvalidOption},
		{"nil option", "u", nil, []envelope.MakeOption{nil}, envelope.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := envelope.Make(tt.urn, tt.data, tt.opts...)
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, e)
			assert.Regexp(t, `^envelope: `, err.Error())
			if errors.Is(tt.want, envelope.ErrInvalidData) {
				_, err := envelope.DataJSON(tt.data)
				require.ErrorIs(t, err, envelope.ErrInvalidData, "DataJSON refuses what Make refuses")
			}
		})
	}
}

func TestMakeIDsAreCanonicalUUIDv4(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		e, err := envelope.Make("urn:a:b", nil)
		require.NoError(t, err)
		for _, id := range []string{e.TraceID, e.Meta.ID} {
			u, err := uuid.Parse(id)
			require.NoError(t, err)
			require.Equal(t, u.String(), id, "the canonical lower-case form")
			require.Equal(t, uuid.Version(4), u.Version())
			require.Equal(t, uuid.RFC4122, u.Variant())
			require.False(t, seen[id], "ids repeat")
			seen[id] = true
		}
	}
	traced, err := envelope.Make("urn:a:b", nil, envelope.WithTraceID("t"))
	require.NoError(t, err)
	assert.Equal(t, "t", traced.TraceID)
	identified, err := envelope.Make("urn:a:b", nil, envelope.WithMessageID("m"))
	require.NoError(t, err)
	assert.Equal(t, "m", identified.Meta.ID)
	for _, id := range []string{traced.Meta.ID, identified.TraceID} {
		_, err = uuid.Parse(id)
		require.NoError(t, err, "the other id is still drawn")
	}
}

func TestMakeDataIsCapped(t *testing.T) {
	t.Parallel()
	e, err := envelope.Make("urn:a:b", map[string]any{"a": 1})
	require.NoError(t, err)
	assert.Equal(t, len(e.Data), cap(e.Data), "appending to Data reallocates")
	id := e.Meta.ID
	e.Data[2] = 'b'
	assert.Equal(t, id, e.Meta.ID, "writing Data changes no other field")
}
