package messaging

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// Codec converts between connector bytes and a stage's payload type.
// Implementations must be safe for concurrent use.
type Codec interface {
	// Name is the value of the channel attribute "codec" selecting it.
	Name() string
	// Supports reports whether values of t can be encoded and decoded.
	Supports(t reflect.Type) bool
	// Encode converts v (of a supported type) to bytes.
	Encode(v any) ([]byte, error)
	// Decode converts b to a value of type t.
	Decode(b []byte, t reflect.Type) (any, error)
}

// MetadataEncoder is an optional capability of a [Codec]: EncodeWithMetadata returns the
// bytes of v and metadata items that the runtime attaches to the outgoing message, so that
// a connector's sink can use what the codec learned while encoding (the BabelQueue codec
// attaches the envelope it encoded) instead of decoding the bytes it was just given. The
// runtime calls it instead of Encode when the codec has it.
type MetadataEncoder interface {
	EncodeWithMetadata(v any) ([]byte, []any, error)
}

// CodecProvider is an optional Connector capability: codecs the connector
// contributes (e.g. the BabelQueue envelope codec).
type CodecProvider interface {
	Codecs() []Codec
}

// Names of the built-in codecs.
const (
	CodecBytes  = "bytes"
	CodecString = "string"
	CodecJSON   = "json"
)

var (
	bytesType  = reflect.TypeFor[[]byte]()
	stringType = reflect.TypeFor[string]()
)

// BytesCodec passes []byte payloads through unchanged.
type BytesCodec struct{}

var _ Codec = BytesCodec{}

// Name returns "bytes".
func (BytesCodec) Name() string { return CodecBytes }

// Supports reports t == []byte.
func (BytesCodec) Supports(t reflect.Type) bool { return t == bytesType }

// Encode returns v, which must be a []byte.
func (BytesCodec) Encode(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("messaging: bytes codec cannot encode %T", v)
	}
	return b, nil
}

// Decode returns b.
func (BytesCodec) Decode(b []byte, t reflect.Type) (any, error) {
	if t != bytesType {
		return nil, fmt.Errorf("messaging: bytes codec cannot decode into %v", t)
	}
	return b, nil
}

// StringCodec converts string payloads to and from UTF-8 bytes.
type StringCodec struct{}

var _ Codec = StringCodec{}

// Name returns "string".
func (StringCodec) Name() string { return CodecString }

// Supports reports t == string.
func (StringCodec) Supports(t reflect.Type) bool { return t == stringType }

// Encode returns the bytes of v, which must be a string.
func (StringCodec) Encode(v any) ([]byte, error) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("messaging: string codec cannot encode %T", v)
	}
	return []byte(s), nil
}

// Decode returns b as a string.
func (StringCodec) Decode(b []byte, t reflect.Type) (any, error) {
	if t != stringType {
		return nil, fmt.Errorf("messaging: string codec cannot decode into %v", t)
	}
	return string(b), nil
}

// JSONCodec uses encoding/json. It supports every type except channels,
// functions and complex numbers.
type JSONCodec struct{}

var _ Codec = JSONCodec{}

// Name returns "json".
func (JSONCodec) Name() string { return CodecJSON }

// Supports reports whether encoding/json can handle t's kind.
func (JSONCodec) Supports(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return false
	default:
		return true
	}
}

// Encode marshals v.
func (JSONCodec) Encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("messaging: json codec: %w", err)
	}
	return b, nil
}

// Decode unmarshals b into a new value of type t.
func (JSONCodec) Decode(b []byte, t reflect.Type) (any, error) {
	p := reflect.New(t)
	if err := json.Unmarshal(b, p.Interface()); err != nil {
		return nil, fmt.Errorf("messaging: json codec: %w", err)
	}
	return p.Elem().Interface(), nil
}

// defaultCodecFor returns the implicit codec name for t ("bytes" for []byte,
// "string" for string), or "".
func defaultCodecFor(t reflect.Type) string {
	switch t {
	case bytesType:
		return CodecBytes
	case stringType:
		return CodecString
	default:
		return ""
	}
}
