package connector

import (
	"fmt"
	"reflect"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

var (
	envelopeType    = reflect.TypeFor[envelope.Envelope]()
	envelopePtrType = reflect.TypeFor[*envelope.Envelope]()
)

// EnvelopeCodec is the "babelqueue" codec: BabelQueue envelopes as *envelope.Envelope
// (or envelope.Envelope) payloads. A body that is not an acceptable envelope fails
// decoding with envelope.ErrPoison, so the runtime dead-letters it at once. The routing
// URN is in [IncomingMetadata].URN.
type EnvelopeCodec struct{}

var _ messaging.Codec = EnvelopeCodec{}

// Name returns "babelqueue".
func (EnvelopeCodec) Name() string { return CodecBabelQueue }

// Supports reports whether t is envelope.Envelope or *envelope.Envelope.
func (EnvelopeCodec) Supports(t reflect.Type) bool { return t == envelopeType || t == envelopePtrType }

// Encode encodes an envelope.
func (EnvelopeCodec) Encode(v any) ([]byte, error) {
	switch e := v.(type) {
	case *envelope.Envelope:
		if e == nil {
			return nil, fmt.Errorf("pulsar: babelqueue codec: %w", bqpulsar.ErrInvalidOption)
		}
		b, err := e.Encode()
		if err != nil {
			return nil, fmt.Errorf("pulsar: babelqueue codec: %w", err)
		}
		return b, nil
	case envelope.Envelope:
		return EnvelopeCodec{}.Encode(&e)
	default:
		return nil, fmt.Errorf("pulsar: babelqueue codec cannot encode %T", v)
	}
}

// EncodeWithMetadata is Encode, returning also an [EncodedEnvelope] item that the runtime
// attaches to the outgoing message (messaging.MetadataEncoder), so that the sink projects
// the bq-* properties from the envelope instead of decoding the bytes again.
func (c EnvelopeCodec) EncodeWithMetadata(v any) ([]byte, []any, error) {
	b, err := c.Encode(v)
	if err != nil {
		return nil, nil, err
	}
	env, _ := v.(*envelope.Envelope)
	if e, ok := v.(envelope.Envelope); ok {
		env = &e
	}
	return b, []any{EncodedEnvelope{Envelope: env}}, nil
}

var _ messaging.MetadataEncoder = EnvelopeCodec{}

// Decode classifies b as an envelope (attempts as in the body; the reconciled count is
// [IncomingMetadata].Attempts).
func (EnvelopeCodec) Decode(b []byte, t reflect.Type) (any, error) {
	env, err := envelope.Classify(b)
	if err != nil {
		return nil, fmt.Errorf("pulsar: babelqueue codec: %w", err)
	}
	switch t {
	case envelopePtrType:
		return env, nil
	case envelopeType:
		return *env, nil
	default:
		return nil, fmt.Errorf("pulsar: babelqueue codec cannot decode into %v", t)
	}
}

// EncodedEnvelope is the metadata item that carries the envelope a babelqueue-codec payload
// encodes, so that the sink projects its bq-* properties without decoding the bytes it was
// just given.
type EncodedEnvelope struct {
	// Envelope is the encoded envelope; do not modify it.
	Envelope *envelope.Envelope
}
