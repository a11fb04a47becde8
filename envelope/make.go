package envelope

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
	"unsafe"
)

// MakeOption configures [Make].
type MakeOption interface {
	apply(c *makeConfig) error
}

type makeConfig struct {
	queue     string
	traceID   string
	messageID string
	createdAt time.Time
}

type makeOptionFunc func(c *makeConfig) error

func (f makeOptionFunc) apply(c *makeConfig) error { return f(c) }

// WithQueue sets meta.queue, the logical queue name (not the topic URL). Default: "" (no
// queue; written as "queue":""). The name must be valid UTF-8.
func WithQueue(name string) MakeOption {
	return makeOptionFunc(func(c *makeConfig) error {
		if !utf8.ValidString(name) {
			return fmt.Errorf("%w: queue name is not valid UTF-8", ErrInvalidOption)
		}
		c.queue = name
		return nil
	})
}

// WithTraceID continues an existing trace: trace_id is set to id instead of a fresh random
// UUID v4. Default: a new UUID v4. A blank id or one that is not valid UTF-8 is an error.
func WithTraceID(id string) MakeOption {
	return makeOptionFunc(func(c *makeConfig) error {
		if IsBlank(id) || !utf8.ValidString(id) {
			return fmt.Errorf("%w: trace id %q is blank or not valid UTF-8", ErrInvalidOption, id)
		}
		c.traceID = id
		return nil
	})
}

// WithMessageID overrides meta.id, for tests and idempotent producers that derive the id
// from their own key. Default: a new UUID v4. A blank id or one that is not valid UTF-8 is an
// error.
func WithMessageID(id string) MakeOption {
	return makeOptionFunc(func(c *makeConfig) error {
		if IsBlank(id) || !utf8.ValidString(id) {
			return fmt.Errorf("%w: message id %q is blank or not valid UTF-8", ErrInvalidOption, id)
		}
		c.messageID = id
		return nil
	})
}

// WithCreatedAt sets meta.created_at, written as Unix milliseconds (truncated). Default:
// time.Now(); the zero time also means time.Now().
func WithCreatedAt(t time.Time) MakeOption {
	return makeOptionFunc(func(c *makeConfig) error {
		c.createdAt = t
		return nil
	})
}

// Make builds a fresh envelope for urn: trace_id and meta.id are new UUID v4s (unless
// overridden), meta.lang is [Lang], meta.schema_version is [SchemaVersion], meta.created_at
// is now in Unix milliseconds and attempts is 0. The URN is stored with blank removed at
// both ends, so Job == URN().
//
// data becomes the data object:
//   - nil (or a nil map or pointer) becomes {};
//   - a [json.RawMessage] or []byte must hold one JSON object; its text is kept (compacted,
//     copied) and empty means {};
//   - anything else is marshalled with encoding/json without HTML escaping (map keys
//     sorted) and must produce an object. A map[string]any holding only nil, bool,
//     string, the integer and float types, json.Number, map[string]any,
//     map[string]string, []any and []string is written by this package directly, to the
//     same bytes, without reflection.
//
// Both identifiers come from one read of crypto/rand, and the Envelope, their text and the
// data text share one allocation (up to about 8 KiB of data); data is encoded in pooled
// scratch memory.
//
// Errors wrap [ErrInvalidURN] (blank URN), [ErrInvalidData] (not an object, NaN or ±Inf,
// unmarshalable) or [ErrInvalidOption].
func Make(urn string, data any, opts ...MakeOption) (*Envelope, error) {
	job := trimBlank(urn)
	if job == "" || !utf8.ValidString(job) {
		return nil, fmt.Errorf("%w: %q is blank or not valid UTF-8", ErrInvalidURN, urn)
	}
	sc := getScratch()
	defer sc.release()
	// The options write into the pooled scratch: a local config would escape to the heap
	// through the interface call.
	cfg := &sc.cfg
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o.apply(cfg); err != nil {
			return nil, err
		}
	}
	text, err := sc.dataText(data)
	if err != nil {
		return nil, err
	}
	// One allocation holds the Envelope, the text of both identifiers and the data.
	nIDs := 0
	if cfg.traceID == "" || cfg.messageID == "" {
		nIDs = 2 * uuidLen
	}
	e, buf := newEnvelope(nIDs + len(text))
	if nIDs > 0 {
		// One read of the system's random source for both identifiers.
		if err := newUUIDs(buf[:nIDs]); err != nil {
			return nil, err
		}
		if cfg.traceID == "" {
			cfg.traceID = unsafe.String(&buf[0], uuidLen) //nolint:gosec // G103: never written again
		}
		if cfg.messageID == "" {
			cfg.messageID = unsafe.String(&buf[uuidLen], uuidLen) //nolint:gosec // G103: never written again
		}
	}
	copy(buf[nIDs:], text)
	if cfg.createdAt.IsZero() {
		cfg.createdAt = time.Now()
	}
	*e = Envelope{
		Job:     job,
		TraceID: cfg.traceID,
		Data:    buf[nIDs:len(buf):len(buf)], // capped: appending reallocates
		Meta: Meta{
			ID:            cfg.messageID,
			Queue:         cfg.queue,
			Lang:          Lang,
			SchemaVersion: SchemaVersion,
			CreatedAt:     cfg.createdAt.UnixMilli(),
		},
	}
	return e, nil
}

// uuidLen is the length of a UUID in its canonical text form.
const uuidLen = 36

// newUUIDs writes len(dst)/36 random (version 4, RFC 9562 variant) UUIDs into dst in their
// canonical form (lower-case hex, 8-4-4-4-12, as uuid.UUID.String writes them), from a
// single read of the buffered random source (readRandom).
func newUUIDs(dst []byte) error {
	var raw [2 * 16]byte
	n := len(dst) / uuidLen
	if err := readRandom(raw[:16*n]); err != nil {
		return err
	}
	for i := range n {
		u := raw[16*i : 16*i+16]
		u[6] = (u[6] & 0x0f) | 0x40 // version 4
		u[8] = (u[8] & 0x3f) | 0x80 // variant 10
		out := dst[uuidLen*i : uuidLen*(i+1)]
		hex.Encode(out[0:8], u[0:4])
		out[8] = '-'
		hex.Encode(out[9:13], u[4:6])
		out[13] = '-'
		hex.Encode(out[14:18], u[6:8])
		out[18] = '-'
		hex.Encode(out[19:23], u[8:10])
		out[23] = '-'
		hex.Encode(out[24:36], u[10:16])
	}
	return nil
}

// DataJSON returns the JSON object text that [Make] puts in an envelope's data for data, by
// the same rules: nil, a nil map and anything encoding to null are {}; json.RawMessage and
// []byte are validated and compacted (empty is {}); anything else is written as
// encoding/json writes it, without HTML escaping. Data that is not one JSON object is an
// error wrapping [ErrInvalidData]. A publisher that checks data before it sends it (against
// a JSON Schema, say) checks, and sends, this text. The text is the caller's own.
func DataJSON(data any) (json.RawMessage, error) {
	sc := getScratch()
	defer sc.release()
	text, err := sc.dataText(data)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(text), nil
}

// dataText returns the compact JSON object text of the data argument of Make, valid until
// sc is released:
//   - nil, a nil map[string]any and anything encoding to null are {};
//   - json.RawMessage and []byte are validated and compacted;
//   - map[string]any of the common types is written directly (appendValue), exactly as
//     encoding/json would;
//   - anything else goes through encoding/json without HTML escaping.
func (sc *jsonScratch) dataText(data any) ([]byte, error) {
	switch d := data.(type) {
	case nil:
		return emptyObject, nil
	case json.RawMessage:
		return sc.rawObject(d)
	case []byte:
		return sc.rawObject(d)
	case map[string]any:
		if d == nil {
			return emptyObject, nil
		}
		if b, ok := appendMap(sc.b[:0], d, 1, &sc.keys); ok {
			sc.b = b
			return b, nil
		}
	}
	sc.buf.Reset()
	if err := sc.enc.Encode(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidData, err)
	}
	b := bytes.TrimSuffix(sc.buf.Bytes(), []byte("\n"))
	switch {
	case string(b) == "null": // a nil map or pointer
		return emptyObject, nil
	case b[0] != '{':
		return nil, dataError(fmt.Sprintf("%T encodes to a JSON %s, want an object", data, kindOf(b[0])))
	}
	return b, nil
}

// rawObject validates raw as one JSON object and returns its compact text; empty means {}.
func (sc *jsonScratch) rawObject(raw []byte) ([]byte, error) {
	obj, ws, err := checkData(raw)
	if err != nil {
		return nil, err
	}
	if ws {
		sc.b = appendCompact(sc.b[:0], obj)
		return sc.b, nil
	}
	return obj, nil
}

// release returns sc to the pool unless one of its buffers grew past maxPooled.
func (sc *jsonScratch) release() {
	sc.cfg = makeConfig{} // keep no caller's strings alive (appendMap clears its keys)
	if cap(sc.b) > maxPooled || sc.buf.Cap() > maxPooled || cap(sc.keys) > maxPooled/16 {
		return
	}
	scratchPool.Put(sc)
}
