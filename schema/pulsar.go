package schema

import (
	"context"
	"fmt"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// Check validates data for urn with p's schema: nil when urn has no schema or data is
// valid, a [*ValidationError] when it is not, the provider's error when it cannot answer.
// data is the JSON text of the data block.
func Check(p Provider, urn string, data []byte) error {
	s, found, err := p.Schema(urn)
	if err != nil {
		return fmt.Errorf("schema: look up the schema of %s: %w", urn, err)
	}
	if !found {
		return nil
	}
	return s.Validate(data)
}

// Middleware returns pulsar consumer middleware, a Handler hook
// (pulsar.WithHooks(pulsar.Hooks{Handler: schema.Middleware(p)})), that checks every delivery's data against
// its URN's schema from p: invalid data is dead-lettered at once (pulsar.DeadLetter, reason
// failed, no retries) with the [*ValidationError] as the error, and the handler is not run;
// a URN without a schema, or valid data, goes on to the handler. A provider that cannot
// answer fails the delivery (an ordinary failure, retried by the consumer's policy).
func Middleware(p Provider) func(next bqpulsar.HandlerFunc) bqpulsar.HandlerFunc {
	return func(next bqpulsar.HandlerFunc) bqpulsar.HandlerFunc {
		return func(ctx context.Context, env *envelope.Envelope, msg apulsar.Message) error {
			s, found, err := p.Schema(env.URN())
			if err != nil {
				return fmt.Errorf("schema: look up the schema of %s: %w", env.URN(), err)
			}
			if found {
				if err := s.Validate(env.Data); err != nil {
					return bqpulsar.DeadLetter(err)
				}
			}
			return next(ctx, env, msg)
		}
	}
}

// Publisher is a pulsar.Publisher that refuses to send data failing its URN's schema: the
// Publish variants return a [*ValidationError] listing every violation and send nothing. A
// URN without a schema is sent unchecked. Its methods are those of pulsar.Publisher, with
// the same signatures; it is safe for concurrent use.
type Publisher struct {
	pub      *bqpulsar.Publisher
	provider Provider
}

// NewPublisher wraps pub with the schemas of provider. Closing the wrapper closes pub.
// Errors wrap [ErrInvalidOption].
func NewPublisher(pub *bqpulsar.Publisher, provider Provider) (*Publisher, error) {
	if pub == nil {
		return nil, fmt.Errorf("%w: nil publisher", ErrInvalidOption)
	}
	if provider == nil {
		return nil, fmt.Errorf("%w: nil provider", ErrInvalidOption)
	}
	return &Publisher{pub: pub, provider: provider}, nil
}

// Unwrap returns the wrapped publisher, which sends without checking.
func (p *Publisher) Unwrap() *bqpulsar.Publisher { return p.pub }

// Topic returns the topic of the wrapped publisher.
func (p *Publisher) Topic() string { return p.pub.Topic() }

// Close closes the wrapped publisher.
func (p *Publisher) Close() error { return p.pub.Close() }

// check validates data for urn and returns the JSON text to send: the text envelope.Make
// writes for data ([envelope.DataJSON]), made once, here, and sent as it is by the wrapped
// publisher, so what is checked is what is sent (nil, a nil map or pointer and an empty
// json.RawMessage or []byte are {}).
func (p *Publisher) check(urn string, data any) (any, error) {
	s, found, err := p.provider.Schema(urn)
	if err != nil {
		return nil, fmt.Errorf("schema: look up the schema of %s: %w", urn, err)
	}
	if !found {
		return data, nil
	}
	raw, err := envelope.DataJSON(data)
	if err != nil {
		return nil, fmt.Errorf("schema: publish %s: %w", urn, err)
	}
	if err := s.Validate(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Publish checks data, then sends it like pulsar.Publisher.Publish.
func (p *Publisher) Publish(ctx context.Context, urn string, data any, opts ...bqpulsar.PublishOption) (string, error) {
	d, err := p.check(urn, data)
	if err != nil {
		return "", err
	}
	return p.pub.Publish(ctx, urn, d, opts...)
}

// PublishEnvelope checks env's data, then sends env like pulsar.Publisher.PublishEnvelope.
// An envelope without data is encoded, and checked, with {}.
func (p *Publisher) PublishEnvelope(ctx context.Context, env *envelope.Envelope, opts ...bqpulsar.PublishOption) (string, error) {
	if env != nil {
		data, err := envelope.DataJSON(env.Data)
		if err != nil {
			return "", fmt.Errorf("schema: publish %s: %w", env.URN(), err)
		}
		if err := Check(p.provider, env.URN(), data); err != nil {
			return "", err
		}
	}
	return p.pub.PublishEnvelope(ctx, env, opts...)
}

// PublishAsync checks data, then enqueues it like pulsar.Publisher.PublishAsync; invalid
// data returns the [*ValidationError] at once and done is never called.
func (p *Publisher) PublishAsync(ctx context.Context, urn string, data any, done func(messageID string, err error), opts ...bqpulsar.PublishOption) error {
	d, err := p.check(urn, data)
	if err != nil {
		return err
	}
	return p.pub.PublishAsync(ctx, urn, d, done, opts...)
}

// TryPublishAsync checks data, then enqueues it like pulsar.Publisher.TryPublishAsync.
func (p *Publisher) TryPublishAsync(ctx context.Context, urn string, data any, done func(messageID string, err error), opts ...bqpulsar.PublishOption) error {
	d, err := p.check(urn, data)
	if err != nil {
		return err
	}
	return p.pub.TryPublishAsync(ctx, urn, d, done, opts...)
}
