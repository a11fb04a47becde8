package pulsar

import (
	"fmt"
	"time"
)

// Middleware wraps a handler: it receives the context, the envelope and the Pulsar message
// of every delivery before the handler does, and the handler's outcome (the returned error,
// possibly a [DeadLetter] or [RetryAfter] outcome) on the way back. Idempotency, payload
// validation and tracing are written as middleware.
//
// A middleware that returns without calling next decides the outcome itself: nil
// acknowledges the message, an error settles it as a failed delivery.
type Middleware func(next HandlerFunc) HandlerFunc

// WithMiddleware wraps every registered handler in mw. The first middleware given is the
// outermost: WithMiddleware(a, b) runs a, then b, then the handler, and the outcome goes
// back through b, then a. Several WithMiddleware options append in the order given. A nil
// middleware is refused. Default: none.
func WithMiddleware(mw ...Middleware) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		for i, m := range mw {
			if m == nil {
				return fmt.Errorf("%w: nil middleware at position %d", ErrInvalidOption, i)
			}
		}
		c.middleware = append(c.middleware, mw...)
		return nil
	})
}

// chain wraps h in mw, the first outermost.
func chain(h HandlerFunc, mw []Middleware) HandlerFunc {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// WithDeliveryHook adds a delivery hook (see [DeliveryHook]). Several hooks nest: the first
// given is called first and its context is passed to the next; their finish functions run
// in reverse order. Default: none.
func WithDeliveryHook(h DeliveryHook) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if h == nil {
			return fmt.Errorf("%w: nil delivery hook", ErrInvalidOption)
		}
		c.deliveryHooks = append(c.deliveryHooks, h)
		return nil
	})
}

// DeadLetter returns the handler outcome that dead-letters the message on this delivery,
// whatever attempts are left: for a failure no retry can fix, such as a payload that fails
// validation. With dead-lettering off the message is acknowledged, logged at WARN and
// reported as an [ExhaustedError]. err may be nil.
func DeadLetter(err error) error { return &DeadLetterError{Err: err} }

// RetryAfter returns the handler outcome "failed, retry after d": the delivery counts as
// failed (so maxAttempts still applies: an exhausted message is dead-lettered), and its
// retry is delayed by d instead of the policy's backoff. With retry.Republish on Shared and
// Key_Shared subscriptions the copy is sent with DeliverAfter; on Exclusive and Failover the
// worker waits d before republishing; with retry.Nack the negative acknowledgement is sent
// after d (the message stays unacknowledged meanwhile, and is nacked at once if the consumer
// stops). d ≤ 0 means the policy's backoff.
func RetryAfter(d time.Duration, err error) error { return &RetryAfterError{Delay: d, Err: err} }

// HealthChecker is anything that reports a [Health]: a [Consumer], say.
type HealthChecker interface {
	Health() Health
}
