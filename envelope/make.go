package envelope

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
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
//     sorted) and must produce an object.
//
// Errors wrap [ErrInvalidURN] (blank URN), [ErrInvalidData] (not an object, NaN or ±Inf,
// unmarshalable) or [ErrInvalidOption].
func Make(urn string, data any, opts ...MakeOption) (*Envelope, error) {
	job := trimBlank(urn)
	if job == "" || !utf8.ValidString(job) {
		return nil, fmt.Errorf("%w: %q is blank or not valid UTF-8", ErrInvalidURN, urn)
	}
	var cfg makeConfig
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	raw, err := marshalData(data)
	if err != nil {
		return nil, err
	}
	if cfg.traceID == "" || cfg.messageID == "" {
		// One read of the system's random source for both identifiers.
		var ids [2]string
		if err := newUUIDs(ids[:]); err != nil {
			return nil, err
		}
		if cfg.traceID == "" {
			cfg.traceID = ids[0]
		}
		if cfg.messageID == "" {
			cfg.messageID = ids[1]
		}
	}
	if cfg.createdAt.IsZero() {
		cfg.createdAt = time.Now()
	}
	return &Envelope{
		Job:     job,
		TraceID: cfg.traceID,
		Data:    raw,
		Meta: Meta{
			ID:            cfg.messageID,
			Queue:         cfg.queue,
			Lang:          Lang,
			SchemaVersion: SchemaVersion,
			CreatedAt:     cfg.createdAt.UnixMilli(),
		},
	}, nil
}

// newUUIDs fills ids with random (version 4, RFC 9562 variant) UUIDs from a single read of
// crypto/rand, as uuid.NewRandom would make them one read each.
func newUUIDs(ids []string) error {
	buf := make([]byte, 16*len(ids))
	if _, err := rand.Read(buf); err != nil {
		return fmt.Errorf("envelope: generate uuid: %w", err)
	}
	for i := range ids {
		var u uuid.UUID
		copy(u[:], buf[16*i:])
		u[6] = (u[6] & 0x0f) | 0x40 // version 4
		u[8] = (u[8] & 0x3f) | 0x80 // variant 10
		ids[i] = u.String()
	}
	return nil
}

// marshalData turns the data argument of Make into compact JSON object text owned by the
// envelope.
func marshalData(data any) (json.RawMessage, error) {
	switch d := data.(type) {
	case nil:
		return []byte("{}"), nil
	case json.RawMessage:
		return rawObject(d)
	case []byte:
		return rawObject(d)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidData, err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	switch {
	case string(b) == "null": // a nil map or pointer
		return []byte("{}"), nil
	case b[0] != '{':
		return nil, dataError(fmt.Sprintf("%T encodes to a JSON %s, want an object", data, kindOf(b[0])))
	}
	return b, nil
}

// rawObject validates raw as one JSON object and returns a compact copy; empty means {}.
func rawObject(raw []byte) (json.RawMessage, error) {
	obj, ws, err := checkData(raw)
	if err != nil {
		return nil, err
	}
	if ws {
		return appendCompact(make([]byte, 0, len(obj)), obj), nil
	}
	return append(json.RawMessage(nil), obj...), nil
}
