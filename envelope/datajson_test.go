package envelope_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// viaEncodingJSON is the data text Make wrote before it encoded maps itself: encoding/json
// without HTML escaping.
func viaEncodingJSON(t *testing.T, v any) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

type inner struct {
	A int `json:"a"`
}

func TestMakeMapMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	values := []any{
		nil, true, false, "", "plain", "<b>&amp;</b>", "\x00\x01\x1f\x7f\b\f\n\r\t\"\\/", "\u2028\u2029é€😀",
		"bad \xff\xc3( utf-8", 0.0, math.Copysign(0, -1), 1.0, 0.1, 1e-6, 1e-7, 9.999999e-7, 1e20, 1e21, 123456789e13,
		5e-324, math.MaxFloat64, -1.5e-10, float32(0.1), float32(1e-6), float32(1e-7), float32(1e21), float32(3.4e38),
		0, -1, math.MaxInt64, math.MinInt64, int8(-128), int16(32767), int32(-5), uint(7), uint8(255), uint16(1),
		uint32(math.MaxUint32), uint64(math.MaxUint64), json.Number("9007199254740993"), json.Number("1.0e+400"),
		json.Number(""), json.Number("-0"),
		[]any{},
		[]any{1, "a", nil, []any{map[string]any{}}},
		[]any(nil),
		[]string{"a", "<"},
		[]string(nil),
		map[string]string{"b": "1", "a": "\u2028"},
		map[string]string(nil),
		map[string]any(nil),
		map[string]any{"z": 1, "a": map[string]any{"y": []any{2.5}}, "": "empty key", "\xff": 1},
		inner{A: 1},
		&inner{A: 2}, time.Date(2025, 6, 5, 0, 0, 0, 0, time.UTC), []byte("bytes"), json.RawMessage(` {"r" : 1} `),
		[]int{1, 2},
		map[string]int{"x": 1},
	}
	for i, v := range values {
		data := map[string]any{"v": v, "k" + strconv.Itoa(i): i}
		want, err := viaEncodingJSON(t, data)
		require.NoError(t, err, "%#v", v)
		e, err := envelope.Make("urn:a:b", data)
		require.NoError(t, err, "%#v", v)
		assert.Equal(t, want, string(e.Data), "%#v", v)
	}
}

func TestMakeMapRefusesWhatEncodingJSONRefuses(t *testing.T) {
	t.Parallel()
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for _, v := range []any{
		math.NaN(), math.Inf(1), float32(math.Inf(-1)), json.Number("01"), json.Number("1e"),
		json.Number("x"), make(chan int),
		[]any{math.NaN()},
		cyclic,
	} {
		data := map[string]any{"v": v}
		_, jerr := viaEncodingJSON(t, data)
		require.Error(t, jerr, "%#v", v)
		_, err := envelope.Make("urn:a:b", data)
		require.ErrorIs(t, err, envelope.ErrInvalidData, "%#v", v)
	}
}

// TestMakeRandomMapsMatchEncodingJSON compares random nested maps, the shape of data a
// producer relays from decoded JSON.
func TestMakeRandomMapsMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "é", "\u2028", "\x00", "\"", "\\", "<", "\xff", "😀", "\t", "z", "1"}
	randString := func() string {
		var b bytes.Buffer
		for range r.IntN(6) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	var randValue func(depth int) any
	randValue = func(depth int) any {
		switch k := r.IntN(9); {
		case k == 0 && depth < 4:
			m := map[string]any{}
			for range r.IntN(5) {
				m[randString()] = randValue(depth + 1)
			}
			return m
		case k == 1 && depth < 4:
			s := make([]any, r.IntN(4))
			for i := range s {
				s[i] = randValue(depth + 1)
			}
			return s
		case k == 2:
			return randString()
		case k == 3:
			return math.Float64frombits(r.Uint64()) // any float, NaN and ±Inf included
		case k == 4:
			return r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
		case k == 5:
			return r.Int64() >> r.IntN(64)
		case k == 6:
			return r.IntN(2) == 0
		case k == 7:
			return float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25)))
		default:
			return nil
		}
	}
	for range 3000 {
		data := map[string]any{}
		for range r.IntN(6) {
			data[randString()] = randValue(0)
		}
		want, jerr := viaEncodingJSON(t, data)
		e, err := envelope.Make("urn:a:b", data)
		if jerr != nil {
			require.ErrorIs(t, err, envelope.ErrInvalidData, "%#v", data)
			continue
		}
		require.NoError(t, err, "%#v", data)
		require.Equal(t, want, string(e.Data), "%#v", data)
	}
}
