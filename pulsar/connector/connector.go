package connector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Name is the name of the connector in mp.messaging keys
// (mp.messaging.incoming.<channel>.connector=babelqueue-pulsar).
const Name = "babelqueue-pulsar"

// CodecBabelQueue is the name of the BabelQueue envelope codec the connector contributes.
const CodecBabelQueue = "babelqueue"

// Attribute names of the babelqueue-pulsar connector, as declared by
// [Connector.Attributes] with their types, defaults and directions.
const (
	AttrServiceURL             = "serviceUrl"
	AttrTopic                  = "topic"
	AttrQueue                  = "queue"
	AttrAuthPlugin             = "authPlugin"
	AttrAuthParams             = "authParams"
	AttrTLSTrustCertsFilePath  = "tlsTrustCertsFilePath"
	AttrTLSAllowInsecure       = "tlsAllowInsecureConnection"
	AttrTLSHostnameVerify      = "tlsHostnameVerificationEnable"
	AttrOperationTimeoutMs     = "operationTimeoutMs"
	AttrConnectionTimeoutMs    = "connectionTimeoutMs"
	AttrTracingEnabled         = "tracing-enabled"
	AttrSubscriptionName       = "subscriptionName"
	AttrSubscriptionType       = "subscriptionType"
	AttrInitialPosition        = "subscriptionInitialPosition"
	AttrReceiverQueueSize      = "receiverQueueSize"
	AttrZeroQueue              = "zero-queue"
	AttrMaxInflight            = "max-inflight"
	AttrCompleteAtEnd          = "complete-at-end"
	AttrAckStrategy            = "ack-strategy"
	AttrAckTimeoutMillis       = "ackTimeoutMillis"
	AttrFailureStrategy        = "failure-strategy"
	AttrMaxAttempts            = "max-attempts"
	AttrRetryStrategy          = "retry-strategy"
	AttrRetryDelay             = "retry-delay"
	AttrDeadLetterEnabled      = "dead-letter-enabled"
	AttrDeadLetterTopic        = "dead-letter-topic"
	AttrNackRedeliveryDelay    = "negativeAck.redeliveryDelay"
	AttrNackRedeliveryBackoff  = "negativeAck.redeliveryBackoff"
	AttrReconsumeLaterDelay    = "reconsumeLater.delay"
	AttrDLQMaxRedeliverCount   = "deadLetterPolicy.maxRedeliverCount"
	AttrDLQDeadLetterTopic     = "deadLetterPolicy.deadLetterTopic"
	AttrDLQRetryLetterTopic    = "deadLetterPolicy.retryLetterTopic"
	AttrDLQInitialSubscription = "deadLetterPolicy.initialSubscriptionName"
	AttrBatchIndexAck          = "batchIndexAckEnabled"
	AttrSendWindow             = "max-inflight-messages"
	AttrWaitForWrite           = "waitForWriteCompletion"
	AttrProducerName           = "producerName"
	AttrSendTimeoutMs          = "sendTimeoutMs"
	AttrMaxPendingMessages     = "maxPendingMessages"
	AttrBatchingEnabled        = "batchingEnabled"
	AttrBatchingMaxDelayMicros = "batchingMaxPublishDelayMicros"
	AttrBatchingMaxMessages    = "batchingMaxMessages"
	AttrCompressionType        = "compressionType"
	AttrTransactions           = "transactions"
)

// Option configures [New]. An option reports a value it refuses as an error wrapping
// [bqpulsar.ErrInvalidOption]; New returns the first one.
type Option interface {
	apply(c *config) error
}

type optionFunc func(c *config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	client        apulsar.Client
	clientOpts    apulsar.ClientOptions
	consumerCust  map[string]func(*apulsar.ConsumerOptions)
	producerCust  map[string]func(*apulsar.ProducerOptions)
	logger        *zap.Logger
	deadLetterFor func(context.Context, IncomingMetadata, error)
	hooks         []bqpulsar.Hooks
}

func invalidOption(format string, args ...any) error {
	return fmt.Errorf("connector: %w: "+format, append([]any{bqpulsar.ErrInvalidOption}, args...)...)
}

// refused is invalidOption(format, args...) when the option refuses its value, nil
// otherwise.
func refused(refuse bool, format string, args ...any) error {
	if !refuse {
		return nil
	}
	return invalidOption(format, args...)
}

// set returns the option that refuses with err when it is not nil and applies f otherwise:
// its check is made when the option is built, its effect when New applies it.
func set(err error, f func(cc *config)) Option {
	return optionFunc(func(cc *config) error {
		if err == nil {
			f(cc)
		}
		return err
	})
}

// WithClient makes every channel use c, which the connector never closes. Default: one
// client per distinct client configuration, created and closed by the connector. A nil
// client is refused.
func WithClient(c apulsar.Client) Option {
	return set(refused(c == nil, "nil client"), func(cc *config) { cc.client = c })
}

// WithClientOptions sets what cannot be configured by attributes (an authentication
// provider, a TLS configuration, a logger…); URL, timeouts, authentication and TLS
// attributes of a channel override the matching fields. Default: zero options.
func WithClientOptions(o apulsar.ClientOptions) Option {
	return set(nil, func(cc *config) { cc.clientOpts = o })
}

// WithConsumerCustomizer adjusts the consumer options of channel after the attributes
// were applied. Default: none. A blank channel name or a nil f is refused.
func WithConsumerCustomizer(channel string, f func(*apulsar.ConsumerOptions)) Option {
	return set(checkCustomizer(channel, f == nil), func(cc *config) { cc.consumerCust[channel] = f })
}

// WithProducerCustomizer adjusts the producer options of channel after the attributes
// were applied. Default: none. A blank channel name or a nil f is refused.
func WithProducerCustomizer(channel string, f func(*apulsar.ProducerOptions)) Option {
	return set(checkCustomizer(channel, f == nil), func(cc *config) { cc.producerCust[channel] = f })
}

func checkCustomizer(channel string, nilFunc bool) error {
	switch {
	case strings.TrimSpace(channel) == "":
		return invalidOption("customizer for a blank channel name")
	case nilFunc:
		return invalidOption("nil customizer for channel %q", channel)
	}
	return nil
}

// WithLogger sets the connector's logger; every source and sink logs through it with a
// channel field. Default: zap.NewNop(). A nil logger is refused.
func WithLogger(l *zap.Logger) Option {
	return set(refused(l == nil, "nil logger"), func(cc *config) { cc.logger = l })
}

// WithDeadLetterHook is called after an incoming message was written to its dead-letter
// topic. Default: none. A nil hook is refused.
func WithDeadLetterHook(f func(ctx context.Context, md IncomingMetadata, reason error)) Option {
	return set(refused(f == nil, "nil dead-letter hook"), func(cc *config) { cc.deadLetterFor = f })
}

// WithHooks gives h to every channel: to each incoming channel's source (its Consumer's
// hooks: Delivery, Event) and to each outgoing channel's sink (Publish), as
// bqpulsar.WithHooks does for a Consumer or a Publisher (see bqpulsar.Hooks). Several
// WithHooks compose, in the order given. Default: none.
func WithHooks(h bqpulsar.Hooks) Option {
	return set(nil, func(cc *config) { cc.hooks = append(cc.hooks, h) })
}

// Connector is the babelqueue-pulsar connector of package messaging: Pulsar
// subscriptions as [Source]s, producers as [Sink]s, and the BabelQueue envelope
// codec. Create it with [New] and register it with messaging.WithConnector.
type Connector struct {
	cfg config

	mu      sync.Mutex
	clients map[string]apulsar.Client // created by the connector, by configuration
	closed  bool
}

var (
	_ messaging.IncomingConnector = (*Connector)(nil)
	_ messaging.OutgoingConnector = (*Connector)(nil)
	_ messaging.CodecProvider     = (*Connector)(nil)
	_ messaging.ConnectorCloser   = (*Connector)(nil)
	_ messaging.Source            = (*Source)(nil)
	_ messaging.Sink              = (*Sink)(nil)
)

// New returns the babelqueue-pulsar connector. Nil options are skipped; an option that
// refuses its value makes New fail with an error wrapping [bqpulsar.ErrInvalidOption].
func New(opts ...Option) (*Connector, error) {
	cfg := config{
		consumerCust: map[string]func(*apulsar.ConsumerOptions){},
		producerCust: map[string]func(*apulsar.ProducerOptions){},
		logger:       zap.NewNop(),
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	return &Connector{cfg: cfg, clients: map[string]apulsar.Client{}}, nil
}

// Name returns "babelqueue-pulsar".
func (*Connector) Name() string { return Name }

var (
	dirIn  = []messaging.Direction{messaging.Incoming}
	dirOut = []messaging.Direction{messaging.Outgoing}
)

// Attributes declares every attribute of the connector except health-enabled, which the
// runtime reserves for every channel; the runtime passes its reserved attributes ("codec"
// among them: with codec=babelqueue the sink adds the bq-* properties) to every
// connector.
func (*Connector) Attributes() []messaging.Attribute {
	str, boolean, integer, dur, enum := messaging.AttrString, messaging.AttrBool, messaging.AttrInt, messaging.AttrDuration, messaging.AttrEnum
	return []messaging.Attribute{
		{Name: AttrServiceURL, Type: str, Default: "pulsar://localhost:6650", Description: "broker URL"},
		{Name: AttrTopic, Type: str, Description: "topic (default: the channel name); incoming accepts a comma-separated list"},
		{Name: AttrQueue, Type: str, Directions: dirIn, Description: "BabelQueue logical queue, which names the dead-letter topic <queue>.dlq (default: last topic segment)"},
		{Name: AttrAuthPlugin, Type: enum, Default: "none", Enum: []string{"none", "token", "token-file", "oauth2", "tls"}, Description: "authentication provider"},
		{Name: AttrAuthParams, Type: str, Description: "token, token file, OAuth2 JSON, or tlsCertFile:…,tlsKeyFile:…"},
		{Name: AttrTLSTrustCertsFilePath, Type: str, Description: "trusted CA certificates"},
		{Name: AttrTLSAllowInsecure, Type: boolean, Default: "false", Description: "accept untrusted server certificates"},
		{Name: AttrTLSHostnameVerify, Type: boolean, Default: "false", Description: "verify the server host name"},
		{Name: AttrOperationTimeoutMs, Type: integer, Default: "30000", Description: "client operation timeout"},
		{Name: AttrConnectionTimeoutMs, Type: integer, Default: "10000", Description: "client connection timeout"},
		{Name: AttrTracingEnabled, Type: boolean, Default: "true", Description: "W3C traceparent property, derived from the trace id when absent"},
		{Name: AttrSubscriptionName, Type: str, Default: "babelqueue", Directions: dirIn, Description: "subscription name"},
		{Name: AttrSubscriptionType, Type: enum, Default: "Shared", Enum: []string{"Exclusive", "Shared", "Failover", "Key_Shared"}, Directions: dirIn, Description: "subscription type"},
		{Name: AttrInitialPosition, Type: enum, Default: "Earliest", Enum: []string{"Latest", "Earliest"}, Directions: dirIn, Description: "cursor of a new subscription (Earliest: jobs published before the first subscriber are not skipped)"},
		{Name: AttrReceiverQueueSize, Type: integer, Directions: dirIn, Description: "client prefetch (default min(1000, 2 × max-inflight))"},
		{Name: AttrZeroQueue, Type: boolean, Default: "false", Directions: dirIn, Description: "zero-queue consumer: one permit per receive"},
		{Name: AttrMaxInflight, Type: integer, Default: "256", Directions: dirIn, Description: "delivered-but-unsettled bound"},
		{Name: AttrCompleteAtEnd, Type: boolean, Default: "false", Directions: dirIn, Description: "complete after the last message present at start"},
		{Name: AttrAckStrategy, Type: enum, Default: "ack", Enum: []string{"ack", "cumulative"}, Directions: dirIn, Description: "ack or cumulative ack"},
		{Name: AttrAckTimeoutMillis, Type: integer, Default: "0", Directions: dirIn, Description: "nack messages unsettled longer (0: off)"},
		{Name: AttrFailureStrategy, Type: enum, Default: "babelqueue", Enum: []string{"babelqueue", "nack", "fail", "ignore", "continue", "reconsume-later"}, Directions: dirIn, Description: "what a nack does"},
		{Name: AttrMaxAttempts, Type: integer, Default: "3", Directions: dirIn, Description: "deliveries in total, the first included"},
		{Name: AttrRetryStrategy, Type: enum, Default: "republish", Enum: []string{"republish", "nack"}, Directions: dirIn, Description: "retry mechanism of babelqueue"},
		{Name: AttrRetryDelay, Type: dur, Default: "0", Directions: dirIn, Description: "DeliverAfter of a republished retry"},
		{Name: AttrDeadLetterEnabled, Type: boolean, Default: "true", Directions: dirIn, Description: "false: exhausted messages are acked and dropped"},
		{Name: AttrDeadLetterTopic, Type: str, Directions: dirIn, Description: "dead-letter topic (default <queue>.dlq)"},
		{Name: AttrNackRedeliveryDelay, Type: dur, Directions: dirIn, Description: "NackRedeliveryDelay (client default 60s)"},
		{Name: AttrNackRedeliveryBackoff, Type: str, Directions: dirIn, Description: "nack backoff min,max (ms),multiplier"},
		{Name: AttrReconsumeLaterDelay, Type: integer, Default: "3", Directions: dirIn, Description: "reconsume-later delay in seconds"},
		{Name: AttrDLQMaxRedeliverCount, Type: integer, Directions: dirIn, Description: "native DLQPolicy"},
		{Name: AttrDLQDeadLetterTopic, Type: str, Directions: dirIn, Description: "native DLQPolicy"},
		{Name: AttrDLQRetryLetterTopic, Type: str, Directions: dirIn, Description: "native DLQPolicy"},
		{Name: AttrDLQInitialSubscription, Type: str, Directions: dirIn, Description: "native DLQPolicy"},
		{Name: AttrBatchIndexAck, Type: boolean, Default: "false", Directions: dirIn, Description: "EnableBatchIndexAcknowledgment"},
		{Name: AttrTransactions, Type: dur, Default: "0", Directions: dirIn, Description: "settle each message in a Pulsar transaction of this timeout, which a Pulsar sink's write of a message derived from it joins (0: off)"},
		{Name: AttrSendWindow, Type: integer, Default: "1000", Directions: dirOut, Description: "send window"},
		{Name: AttrWaitForWrite, Type: boolean, Default: "true", Directions: dirOut, Description: "ack upstream after the broker's receipt"},
		{Name: AttrProducerName, Type: str, Directions: dirOut, Description: "producer name"},
		{Name: AttrSendTimeoutMs, Type: integer, Default: "30000", Description: "send timeout (incoming: of the retry and dead-letter producers)"},
		{Name: AttrMaxPendingMessages, Type: integer, Directions: dirOut, Description: "producer queue"},
		{Name: AttrBatchingEnabled, Type: boolean, Default: "true", Directions: dirOut, Description: "producer batching"},
		{Name: AttrBatchingMaxDelayMicros, Type: integer, Default: "1000", Directions: dirOut, Description: "batching delay"},
		{Name: AttrBatchingMaxMessages, Type: integer, Default: "1000", Directions: dirOut, Description: "batch size"},
		{Name: AttrCompressionType, Type: enum, Default: "NONE", Enum: []string{"NONE", "LZ4", "ZLIB", "ZSTD"}, Directions: dirOut, Description: "compression"},
	}
}

// Codecs returns the BabelQueue envelope codec ("babelqueue").
func (*Connector) Codecs() []messaging.Codec { return []messaging.Codec{EnvelopeCodec{}} }

// attrs reads typed attributes, collecting every problem.
type attrs struct {
	c    messaging.ChannelConfig
	errs []error
}

func attr[V messaging.AttrValue](a *attrs, name string) V {
	v, err := messaging.Attr[V](a.c, name)
	if err != nil && !errors.Is(err, messaging.ErrMissingAttribute) {
		a.errs = append(a.errs, err)
	}
	return v
}

func (a *attrs) has(name string) bool {
	v, ok := a.c.Lookup(name)
	return ok && v != ""
}

func (a *attrs) invalid(format string, args ...any) {
	a.errs = append(a.errs, fmt.Errorf("%w: channel %q: "+format, append([]any{messaging.ErrInvalidAttribute, a.c.Channel()}, args...)...))
}

func (a *attrs) positive(name string, v int) {
	if v < 1 {
		a.invalid("%s must be >= 1, got %d", name, v)
	}
}

func (a *attrs) err() error { return errors.Join(a.errs...) }

// queue returns the queue attribute, "" when it is not given or not a valid queue name
// (then a fault is recorded): it is checked whenever it is given, even when
// dead-letter-topic or dead-letter-enabled=false leaves it unused.
func (a *attrs) queue() string {
	if !a.has(AttrQueue) {
		return ""
	}
	q := attr[string](a, AttrQueue)
	if err := dlq.ValidateQueueName(q); err != nil {
		a.invalid("%s: %v", AttrQueue, err)
		return ""
	}
	return q
}

func (a *attrs) topics() []string {
	ts := attr[[]string](a, AttrTopic)
	if len(ts) == 0 {
		ts = []string{a.c.Channel()}
	}
	return ts
}

// NewSource implements messaging.IncomingConnector. Configuration faults wrap
// messaging.ErrInvalidAttribute and name the channel: the attribute faults all in one
// joined error, then a combination [NewSource] refuses (also wrapping
// [bqpulsar.ErrInvalidOption]).
func (c *Connector) NewSource(_ context.Context, cc messaging.ChannelConfig) (messaging.Source, error) {
	a := &attrs{c: cc}
	o, err := c.sourceOptions(a)
	if err != nil {
		return nil, err
	}
	if v := o; o.Transactions > 0 {
		// Judged before the client: a transactional client connects to the broker's
		// transaction coordinator as it is created.
		if err := validateSource(&v); err != nil {
			return nil, constructorError(cc.Channel(), err)
		}
	}
	client, err := c.client(a, o.Transactions > 0)
	if err != nil {
		return nil, err
	}
	s, err := NewSource(client, o)
	if err != nil {
		return nil, constructorError(cc.Channel(), err)
	}
	return s, nil
}

// constructorError marks an option a constructor refused as an invalid attribute of the
// channel; other errors (the client's) pass unchanged.
func constructorError(channel string, err error) error {
	if errors.Is(err, bqpulsar.ErrInvalidOption) {
		return fmt.Errorf("%w: channel %q: %w", messaging.ErrInvalidAttribute, channel, err)
	}
	return err
}

var subTypes = map[string]apulsar.SubscriptionType{
	"Exclusive": apulsar.Exclusive, "Shared": apulsar.Shared, "Failover": apulsar.Failover, "Key_Shared": apulsar.KeyShared,
}

// sourceOptions maps the attributes of an incoming channel to the options of
// [NewSource]. It refuses what only the attributes show (a bad value, a bad
// range, deadLetterPolicy.* with failure-strategy=babelqueue); the combinations of
// options (retry by nack, cumulative acknowledgement, continue, reconsume-later) are
// judged once, by NewSource.
func (c *Connector) sourceOptions(a *attrs) (SourceOptions, error) {
	ch := a.c.Channel()
	o := SourceOptions{
		Channel: ch,
		Consumer: apulsar.ConsumerOptions{
			Topics:                         a.topics(),
			SubscriptionName:               attr[string](a, AttrSubscriptionName),
			Type:                           subTypes[attr[string](a, AttrSubscriptionType)],
			EnableZeroQueueConsumer:        attr[bool](a, AttrZeroQueue),
			EnableBatchIndexAcknowledgment: attr[bool](a, AttrBatchIndexAck),
		},
		MaxInflight:     attr[int](a, AttrMaxInflight),
		CompleteAtEnd:   attr[bool](a, AttrCompleteAtEnd),
		FailureStrategy: FailureStrategy(attr[string](a, AttrFailureStrategy)),
		MaxAttempts:     attr[int](a, AttrMaxAttempts),
		RetryDelay:      attr[time.Duration](a, AttrRetryDelay),
		DeadLetterHook:  c.cfg.deadLetterFor,
		Hooks:           c.cfg.hooks,
		SenderOptions:   senderTimeout(time.Duration(attr[int](a, AttrSendTimeoutMs)) * time.Millisecond),
		Logger:          c.cfg.logger.With(zap.String("channel", ch)),
		Transactions:    attr[time.Duration](a, AttrTransactions),
	}
	if o.Transactions < 0 {
		a.invalid("%s must be >= 0, got %s", AttrTransactions, o.Transactions)
	}
	if attr[string](a, AttrInitialPosition) == "Latest" {
		o.InitialPosition = PositionLatest
	}
	codec, _ := a.c.Lookup(messaging.AttrCodec) // reserved: always passed by the runtime
	o.Envelopes = codec == CodecBabelQueue
	if a.has(AttrReceiverQueueSize) {
		o.Consumer.ReceiverQueueSize = attr[int](a, AttrReceiverQueueSize)
		a.positive(AttrReceiverQueueSize, o.Consumer.ReceiverQueueSize)
	}
	if a.has(AttrNackRedeliveryDelay) {
		o.Consumer.NackRedeliveryDelay = attr[time.Duration](a, AttrNackRedeliveryDelay)
	}
	a.positive(AttrMaxInflight, o.MaxInflight)
	a.positive(AttrMaxAttempts, o.MaxAttempts)
	if attr[string](a, AttrRetryStrategy) == "nack" {
		o.RetryStrategy = retry.Nack
	}
	o.CumulativeAck = attr[string](a, AttrAckStrategy) == "cumulative"
	ackTimeout := attr[int](a, AttrAckTimeoutMillis)
	if ackTimeout < 0 {
		a.invalid("%s must be >= 0, got %d", AttrAckTimeoutMillis, ackTimeout)
	}
	o.AckTimeout = time.Duration(ackTimeout) * time.Millisecond
	o.ReconsumeDelay = time.Duration(attr[int](a, AttrReconsumeLaterDelay)) * time.Second
	if a.has(AttrNackRedeliveryBackoff) {
		b, err := parseNackBackoff(attr[string](a, AttrNackRedeliveryBackoff))
		if err != nil {
			a.invalid("%s: %v", AttrNackRedeliveryBackoff, err)
		}
		o.Consumer.NackBackoffPolicy = seam.NackBackoff(b)
	}
	c.nativeDLQ(a, &o)
	queue := a.queue()
	switch {
	case !attr[bool](a, AttrDeadLetterEnabled):
		o.DeadLetter = dlq.Off()
	case a.has(AttrDeadLetterTopic):
		o.DeadLetter = dlq.Config{Topic: attr[string](a, AttrDeadLetterTopic)}
	case queue != "":
		o.DeadLetter = queueDeadLetter(a, queue, o.Consumer.Topics)
	}
	if err := a.err(); err != nil {
		return o, err
	}
	if f := c.cfg.consumerCust[ch]; f != nil {
		f(&o.Consumer)
	}
	return o, nil
}

// parseNackBackoff parses "min,max,multiplier" (milliseconds, milliseconds, factor ≥ 1).
func parseNackBackoff(v string) (retry.Backoff, error) {
	parts := strings.Split(v, ",")
	if len(parts) != 3 {
		return retry.Backoff{}, fmt.Errorf("%q is not min,max,multiplier", v)
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(parts[0]))
	hi, err2 := strconv.Atoi(strings.TrimSpace(parts[1]))
	mult, err3 := strconv.ParseFloat(strings.TrimSpace(parts[2]), 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return retry.Backoff{}, fmt.Errorf("%q: %w", v, err)
	}
	b := retry.Backoff{Initial: time.Duration(lo) * time.Millisecond, Max: time.Duration(hi) * time.Millisecond, Multiplier: mult}
	if lo < 1 || hi < lo || mult < 1 {
		return b, fmt.Errorf("%q: need 1 <= min <= max and multiplier >= 1", v)
	}
	if err := b.Validate(); err != nil {
		return b, fmt.Errorf("%q: %w", v, err)
	}
	return b, nil
}

// senderTimeout sets the send timeout of the retry and dead-letter producers.
func senderTimeout(d time.Duration) func(*apulsar.ProducerOptions) {
	return func(o *apulsar.ProducerOptions) {
		if d > 0 {
			o.SendTimeout = d
		}
	}
}

// nativeDLQ maps deadLetterPolicy.*, allowed only without the babelqueue strategy.
func (*Connector) nativeDLQ(a *attrs, o *SourceOptions) {
	names := []string{AttrDLQMaxRedeliverCount, AttrDLQDeadLetterTopic, AttrDLQRetryLetterTopic, AttrDLQInitialSubscription}
	var set []string
	for _, n := range names {
		if a.has(n) {
			set = append(set, n)
		}
	}
	if len(set) == 0 {
		return
	}
	if o.FailureStrategy == FailureBabelQueue {
		a.invalid("%s not allowed with %s=babelqueue (it dead-letters itself)", strings.Join(set, ", "), AttrFailureStrategy)
		return
	}
	p := &apulsar.DLQPolicy{
		DeadLetterTopic:         attr[string](a, AttrDLQDeadLetterTopic),
		RetryLetterTopic:        attr[string](a, AttrDLQRetryLetterTopic),
		InitialSubscriptionName: attr[string](a, AttrDLQInitialSubscription),
	}
	if a.has(AttrDLQMaxRedeliverCount) {
		n := attr[int](a, AttrDLQMaxRedeliverCount)
		a.positive(AttrDLQMaxRedeliverCount, n)
		p.MaxDeliveries = uint32(max(n, 0)) //nolint:gosec // checked non-negative
	}
	o.Consumer.DLQ = p
}

// queueDeadLetter names the dead-letter topic after queue: "<queue>.dlq" in the first
// topic's tenant and namespace.
func queueDeadLetter(a *attrs, queue string, topics []string) dlq.Config {
	t, err := dlq.TopicFor(topics[0])
	if err != nil {
		a.invalid("%s: %v", AttrTopic, err)
		return dlq.Config{}
	}
	return dlq.Config{Topic: t[:strings.LastIndexByte(t, '/')+1] + queue + dlq.Suffix}
}

// NewSink implements messaging.OutgoingConnector. Configuration faults wrap
// messaging.ErrInvalidAttribute and name the channel, as for [Connector.NewSource].
func (c *Connector) NewSink(_ context.Context, cc messaging.ChannelConfig) (messaging.Sink, error) {
	a := &attrs{c: cc}
	ch := cc.Channel()
	topics := a.topics()
	if len(topics) != 1 {
		a.invalid("an outgoing channel takes one topic, got %d", len(topics))
	}
	po := apulsar.ProducerOptions{
		Topic:                   topics[0],
		Name:                    attr[string](a, AttrProducerName),
		SendTimeout:             time.Duration(attr[int](a, AttrSendTimeoutMs)) * time.Millisecond,
		DisableBatching:         !attr[bool](a, AttrBatchingEnabled),
		BatchingMaxPublishDelay: time.Duration(attr[int](a, AttrBatchingMaxDelayMicros)) * time.Microsecond,
		BatchingMaxMessages:     uint(max(attr[int](a, AttrBatchingMaxMessages), 0)),
	}
	if a.has(AttrMaxPendingMessages) {
		po.MaxPendingMessages = attr[int](a, AttrMaxPendingMessages)
		a.positive(AttrMaxPendingMessages, po.MaxPendingMessages)
	}
	switch attr[string](a, AttrCompressionType) {
	case "LZ4":
		po.CompressionType = apulsar.LZ4
	case "ZLIB":
		po.CompressionType = apulsar.ZLib
	case "ZSTD":
		po.CompressionType = apulsar.ZSTD
	}
	window := attr[int](a, AttrSendWindow)
	a.positive(AttrSendWindow, window)
	codec, _ := cc.Lookup(messaging.AttrCodec) // reserved: always passed by the runtime
	o := SinkOptions{
		Channel: ch, Producer: po, Window: window,
		NoWaitForWriteCompletion: !attr[bool](a, AttrWaitForWrite),
		ProjectEnvelope:          codec == CodecBabelQueue,
		Tracing:                  attr[bool](a, AttrTracingEnabled),
		Hooks:                    c.cfg.hooks,
		Logger:                   c.cfg.logger.With(zap.String("channel", ch)),
	}
	if err := a.err(); err != nil {
		return nil, err
	}
	if f := c.cfg.producerCust[ch]; f != nil {
		f(&o.Producer)
	}
	client, err := c.client(a, false)
	if err != nil {
		return nil, err
	}
	s, err := NewSink(client, o) //nolint:contextcheck // the sink outlives Start's ctx; Close bounds it
	if err != nil {
		return nil, constructorError(ch, err)
	}
	return s, nil
}

// client returns the shared client, or the connector's client for the channel's client
// attributes, creating it on first use; txn (an incoming channel's transactions) makes it a
// transactional client.
func (c *Connector) client(a *attrs, txn bool) (apulsar.Client, error) {
	if c.cfg.client != nil {
		return c.cfg.client, nil
	}
	co := c.cfg.clientOpts
	co.EnableTransaction = co.EnableTransaction || txn
	co.URL = attr[string](a, AttrServiceURL)
	co.OperationTimeout = time.Duration(attr[int](a, AttrOperationTimeoutMs)) * time.Millisecond
	co.ConnectionTimeout = time.Duration(attr[int](a, AttrConnectionTimeoutMs)) * time.Millisecond
	if a.has(AttrTLSTrustCertsFilePath) {
		co.TLSTrustCertsFilePath = attr[string](a, AttrTLSTrustCertsFilePath)
	}
	if attr[bool](a, AttrTLSAllowInsecure) {
		co.TLSAllowInsecureConnection = true
	}
	if attr[bool](a, AttrTLSHostnameVerify) {
		co.TLSValidateHostname = true
	}
	plugin, params := attr[string](a, AttrAuthPlugin), attr[string](a, AttrAuthParams)
	if plugin != "none" && plugin != "" {
		auth, err := authProvider(plugin, params)
		if err != nil {
			a.invalid("%s=%s: %v", AttrAuthPlugin, plugin, err)
		}
		co.Authentication = auth
	}
	if co.Logger == nil {
		co.Logger = bqpulsar.NewClientLogger(c.cfg.logger)
	}
	if err := a.err(); err != nil {
		return nil, err
	}
	key := strings.Join([]string{
		co.URL, co.OperationTimeout.String(), co.ConnectionTimeout.String(), co.TLSTrustCertsFilePath,
		fmt.Sprint(co.TLSAllowInsecureConnection, co.TLSValidateHostname, co.EnableTransaction), plugin, params,
	}, "\x00")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("pulsar: connector: %w", bqpulsar.ErrClosed)
	}
	if cl, ok := c.clients[key]; ok {
		return cl, nil
	}
	cl, err := apulsar.NewClient(co)
	if err != nil {
		if txn {
			// A transactional client connects to the coordinator as it is created.
			err = seam.TransactionsError(err)
		}
		return nil, fmt.Errorf("pulsar: connector client for %s: %w", co.URL, err)
	}
	c.clients[key] = cl
	return cl, nil
}

func authProvider(plugin, params string) (apulsar.Authentication, error) {
	var (
		auth apulsar.Authentication
		err  error
	)
	switch plugin {
	case "token":
		auth = apulsar.NewAuthenticationToken(params)
	case "token-file":
		auth = apulsar.NewAuthenticationTokenFromFile(params)
	case "oauth2":
		m := map[string]string{}
		if err := json.Unmarshal([]byte(params), &m); err != nil {
			return nil, fmt.Errorf("oauth2 parameters: %w", err)
		}
		auth = apulsar.NewAuthenticationOAuth2(m)
	case "tls":
		var cert, key string
		for p := range strings.SplitSeq(params, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), ":")
			switch k {
			case "tlsCertFile":
				cert = v
			case "tlsKeyFile":
				key = v
			}
		}
		if cert == "" || key == "" {
			return nil, errors.New("tls parameters need tlsCertFile:…,tlsKeyFile:…")
		}
		auth = apulsar.NewAuthenticationTLS(cert, key)
	default:
		err = fmt.Errorf("unknown plugin %q", plugin)
	}
	return auth, err
}

// Close closes the clients the connector created (never one given with [WithClient]).
// Sources and sinks are closed by the runtime before. It is idempotent.
func (c *Connector) Close(context.Context) error {
	c.mu.Lock()
	clients := c.clients
	c.clients, c.closed = map[string]apulsar.Client{}, true
	c.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
	return nil
}
