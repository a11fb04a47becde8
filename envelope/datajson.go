package envelope

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
)

// maxFastDepth bounds the nesting appendValue follows before it leaves the value to
// encoding/json (which detects cycles).
const maxFastDepth = 100

// appendValue appends v encoded exactly as encoding/json encodes it without HTML escaping,
// for the types decoded JSON and simple producers use: nil, bool, string, float64, float32,
// the integer types, json.Number, map[string]any, map[string]string, []any and []string,
// nested. It reports false, with dst in an unspecified state past its original length, when
// v holds any other type or a value encoding/json rejects (NaN, ±Inf, an invalid
// json.Number), so that the caller falls back to encoding/json for the whole value. keys
// is scratch space for sorting map keys, used as a stack by nested maps.
func appendValue(dst []byte, v any, depth int, keys *[]string) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		return strconv.AppendBool(dst, x), true
	case string:
		return appendString(dst, x), true
	case float64:
		return appendFloat(dst, x, 64)
	case float32:
		return appendFloat(dst, float64(x), 32)
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int64:
		return strconv.AppendInt(dst, x, 10), true
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10), true
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10), true
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10), true
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), true
	case uint64:
		return strconv.AppendUint(dst, x, 10), true
	case json.Number:
		if x == "" {
			return append(dst, '0'), true
		}
		if end, _, err := scanNumber(x, 0); err != nil || end != len(x) {
			return dst, false
		}
		return append(dst, x...), true
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), true
		}
		if depth >= maxFastDepth {
			return dst, false
		}
		return appendMap(dst, x, depth+1, keys)
	case map[string]string:
		if x == nil {
			return append(dst, "null"...), true
		}
		return appendStringMap(dst, x, keys), true
	case []any:
		if x == nil {
			return append(dst, "null"...), true
		}
		if depth >= maxFastDepth {
			return dst, false
		}
		dst = append(dst, '[')
		for i, el := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendValue(dst, el, depth+1, keys); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case []string:
		if x == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, el := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, el)
		}
		return append(dst, ']'), true
	}
	return dst, false
}

// appendMap writes m as a JSON object with its keys in sorted order, as encoding/json does,
// its values at depth.
func appendMap(dst []byte, m map[string]any, depth int, keys *[]string) ([]byte, bool) {
	start, end := pushSortedKeys(keys, m)
	defer func() { clear((*keys)[start:end]); *keys = (*keys)[:start] }()
	dst = append(dst, '{')
	for i := start; i < end; i++ {
		if i > start {
			dst = append(dst, ',')
		}
		k := (*keys)[i] // re-read: a nested map may have grown the stack
		dst = appendString(dst, k)
		dst = append(dst, ':')
		var ok bool
		if dst, ok = appendValue(dst, m[k], depth, keys); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendStringMap writes m as a JSON object with its keys in sorted order.
func appendStringMap(dst []byte, m map[string]string, keys *[]string) []byte {
	start, end := pushSortedKeys(keys, m)
	dst = append(dst, '{')
	for i, k := range (*keys)[start:end] {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, m[k])
	}
	clear((*keys)[start:end])
	*keys = (*keys)[:start]
	return append(dst, '}')
}

// pushSortedKeys appends the keys of m to the stack, sorts them and returns their range.
func pushSortedKeys[V any](keys *[]string, m map[string]V) (start, end int) {
	start = len(*keys)
	for k := range m {
		*keys = append(*keys, k)
	}
	end = len(*keys)
	slices.Sort((*keys)[start:end])
	return start, end
}

// appendFloat writes f as encoding/json does: the shortest representation that round-trips,
// in exponent form below 1e-6 and from 1e21 on (with the exponent unpadded). NaN and ±Inf
// are refused.
func appendFloat(dst []byte, f float64, bits int) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if n := len(dst); format == 'e' && n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1] // e-07 → e-7
		dst = dst[:n-1]
	}
	return dst, true
}

// jsonScratch is the reusable working memory of [Make]: its option values, a buffer for
// appendValue and compaction, and an encoding/json encoder (without HTML escaping) writing
// into its own buffer.
type jsonScratch struct {
	cfg  makeConfig
	b    []byte
	keys []string
	buf  bytes.Buffer
	enc  *json.Encoder
}

var scratchPool sync.Pool

func getScratch() *jsonScratch {
	if s, ok := scratchPool.Get().(*jsonScratch); ok {
		return s
	}
	s := new(jsonScratch)
	s.enc = json.NewEncoder(&s.buf)
	s.enc.SetEscapeHTML(false)
	return s
}

// maxPooled is the largest scratch buffer kept for reuse, so one huge message does not pin
// its buffer for the life of the process.
const maxPooled = 64 << 10
