// The one delivery engine of the Pulsar binding: the receive pump, the
// contract's admission of a message (schema-version gate, classification, attempts
// reconciliation, routing) and its settlement (ack, retry by republish or negative ack,
// dead letter, negative ack after a failed write), the producer cache of the settlement
// writes, and the health state. The plain Consumer (package pulsar) and the messaging
// connector's Source (package pulsar/connector) are two fronts on it, so that the same input
// is settled the same way by both.
//
// A failed republish or dead-letter write is never followed by an ack: the original is
// negatively acknowledged and comes back.

package pulsar

import (
	"context"
	"maps"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Receive backoff: the pause after a transient receive error starts at receiveBackoffMin and
// doubles up to receiveBackoffMax; a successful receive resets it.
const (
	receiveBackoffMin = 100 * time.Millisecond
	receiveBackoffMax = 10 * time.Second
)

// engineConfig configures an [engine].
type engineConfig struct {
	// Subscription names the subscription in events, logs and the deliveries' contexts
	// ("" when unknown).
	Subscription string
	// Type is the subscription's type (ConsumerInfo).
	Type apulsar.SubscriptionType
	// MaxAttempts is the number of deliveries in total, the first included (≥ 1).
	MaxAttempts int
	// Policy is the retry policy: its Strategy and Backoff are used.
	Policy retry.Policy
	// BrokerDelay is true when the subscription type honours DeliverAfter (Shared,
	// Key_Shared).
	BrokerDelay bool
	// DeadLetter is the dead-letter configuration.
	DeadLetter dlq.Config
	// SettleRejects settles gate rejections and poison at admission (the contract's
	// pipeline); false leaves a poison body to the front (Env nil, Poison set).
	SettleRejects bool
	// Gate applies the schema-version gate at admission.
	Gate bool
	// Logger receives the engine's logs; never nil.
	Logger *zap.Logger
	// Hooks are the consumer's hooks: its Delivery hooks open a context per delivery and
	// receive its settlement, its Event hooks every event. Nil for none.
	Hooks *hookSet
	// Senders creates the producer of a topic for retries and dead letters.
	Senders func(topic string) (seam.Sender, func(), error)
	// Retention makes sure the retention subscription of a dead-letter topic exists (topic
	// is the one the message was received on); it is called before the first write to each
	// dead-letter topic, and again after a failure. Nil: no retention subscription.
	Retention func(ctx context.Context, topic, deadLetterTopic string) error
	// MaxMessageSize bounds what a settlement writes: a dead-letter copy larger than it
	// (properties included) is replaced by a truncated copy, and a retry copy larger than it
	// goes to the dead-letter path. 0 means [defaultMaxMessageSize].
	MaxMessageSize int
	// Txns, when set, settles every delivery inside a transaction of its own
	// (transactions.go); nil settles at least once.
	Txns *transactions
}

// defaultMaxMessageSize is the default bound of a settlement write: Apache Pulsar's default
// maxMessageSize (5 MiB, metadata included) less 64 KiB of headroom for the message's
// metadata.
const defaultMaxMessageSize = 5<<20 - 64<<10

// engine admits and settles the messages of one subscription. It is safe for concurrent
// use: deliveries are independent.
type engine struct {
	cfg     engineConfig
	settler seam.Settler
	senders *senderCache
	health  healthState

	info     *ConsumerInfo // what ConsumerInfoFrom reports in a delivery's context
	retained sync.Map      // dead-letter topic → struct{}: retention subscription ensured
	timers   timerSet      // delayed negative acks
}

// newEngine returns an engine that settles through settler.
func newEngine(cfg engineConfig, settler seam.Settler) *engine {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.MaxAttempts < 1 {
		cfg.MaxAttempts = retry.DefaultMaxAttempts
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = defaultMaxMessageSize
	}
	e := &engine{cfg: cfg, settler: settler, info: &ConsumerInfo{Subscription: cfg.Subscription, Type: cfg.Type}}
	e.senders = newSenderCache(cfg.Senders)
	e.health.init()
	return e
}

// maxAttempts returns the number of deliveries in total.
func (e *engine) maxAttempts() int { return e.cfg.MaxAttempts }

// logger returns the engine's logger.
func (e *engine) logger() *zap.Logger { return e.cfg.Logger }

// observe hands ev to the Event hooks, completed with what the engine knows: the
// subscription and, for an event of delivery d, its context, message, envelope, topic,
// routing URN and attempt where ev leaves them empty. It is small enough to be inlined, so
// that a consumer without an Event hook does not build the event it would drop.
func (e *engine) observe(d *Delivery, ev Event) {
	if e.cfg.Hooks.observing() {
		e.emitFor(d, ev)
	}
}

// emitFor is observe's work when an Event hook is set. It stays out of line, so that
// observe stays small enough to inline.
//
//go:noinline
func (e *engine) emitFor(d *Delivery, ev Event) { e.cfg.Hooks.emit(e.complete(d, ev)) }

// complete fills the fields of ev that d says (see observe).
func (e *engine) complete(d *Delivery, ev Event) Event {
	ev.Subscription = e.cfg.Subscription
	if d == nil {
		return ev
	}
	ev.Context, ev.Message, ev.Envelope = d.ctx, d.msg, d.env
	if ev.Topic == "" {
		ev.Topic = d.msg.Topic()
	}
	if ev.URN == "" {
		ev.URN = d.urn
	}
	if ev.Attempt == 0 {
		ev.Attempt = d.counted
	}
	return ev
}

// safeCall runs f and returns its panic as a *PanicError.
func safeCall(where string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Where: where, Value: r}
		}
	}()
	f()
	return nil
}

func copyProps(p map[string]string) map[string]string {
	out := make(map[string]string, len(p)+2)
	maps.Copy(out, p)
	return out
}

// close stops the delayed negative acks (nacking their messages at once) and closes the
// producers the engine created, after waiting for any creation in progress.
func (e *engine) close() {
	e.timers.stop()
	e.senders.close()
	e.health.stopped()
}

// status returns the engine's health.
func (e *engine) status() Health { return e.health.get() }

// setReceiving records the outcome of a receive in the health state.
func (e *engine) setReceiving(err error) {
	if err != nil {
		e.health.failing("receive", err)
		return
	}
	e.health.ok("receive")
}
