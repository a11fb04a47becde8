package connector

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Source is a Pulsar subscription as a unicast reactive.Publisher of messages, the
// incoming side of the babelqueue-pulsar connector. It is demand and failure strategies
// over a bqpulsar.Consumer in the pull style ([bqpulsar.Consumer.Next]): a receive happens
// only while the subscriber's demand exceeds the received-but-undelivered messages, and
// the Consumer's in-flight bound (MaxInflight) holds Next back while that many messages
// are unsettled, so Request(reactive.Unbounded) never means unbounded unsettled messages.
// Admission and every settlement are the Consumer's, through the message's
// bqpulsar.Delivery; the Source has no settlement code of its own. Close it with
// [Source.Close].
type Source struct {
	channel       string
	c             *bqpulsar.Consumer // receive, admission and settlement
	pc            apulsar.Consumer   // the subscription (for complete-at-end and reconsume-later)
	settler       *sourceSettler     // what the Consumer's settlements go through
	cumulative    *cumulativeSettler // nil unless CumulativeAck
	strategy      FailureStrategy
	hook          func(context.Context, IncomingMetadata, error)
	logger        *zap.Logger
	completeAtEnd bool
	ackTimeout    time.Duration
	reconsume     time.Duration
	ends          map[string]apulsar.MessageID // per topic: the last message at creation

	wake chan struct{} // capacity 1: the pump may receive again

	mu         sync.Mutex
	out        *reactive.Outlet[messaging.Message[[]byte]]
	subscribed bool
	closed     bool
	stopPump   context.CancelFunc
	pumpDone   chan struct{}
	stopNext   context.CancelFunc                 // complete-at-end: ends the pump's Next
	queue      []queued                           // received, not yet delivered
	open       int                                // delivered or queued, not yet acked or nacked by the stage
	endSeen    bool                               // complete-at-end: the last message was received
	endQueued  bool                               // … and delivered (not settled at admission)
	atEnd      bool                               // complete-at-end reached: receive no more
	failure    error                              // fatal: OnError downstream, not live
	completed  bool                               // the stream completed (complete-at-end): not live
	settled    chan struct{}                      // closed and replaced on every settlement
	timers     map[*bqpulsar.Delivery]*time.Timer // ack timeouts of unsettled messages
	closeOnce  sync.Once
}

var _ reactive.Publisher[messaging.Message[[]byte]] = (*Source)(nil)

// queued is a received message waiting for demand.
type queued struct {
	m messaging.Message[[]byte]
	d *bqpulsar.Delivery
}

// NewSource subscribes on client and returns a Source over the subscription, which it
// owns. Errors wrap [ErrInvalidOption] for a refused configuration, or are the client's
// error from Subscribe (a *bqpulsar.ConnectError when the broker cannot be reached, as
// for a Consumer) or GetLastMessageIDs.
func NewSource(client apulsar.Client, o SourceOptions) (*Source, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", bqpulsar.ErrInvalidOption)
	}
	if err := validateSource(&o); err != nil {
		return nil, err
	}
	co := o.Consumer // after validateSource, which may set RetryEnable and the position
	if !o.NoRetentionSubscription && (co.RetryEnable || co.DLQ != nil) {
		// The client's own dead-letter router writes with a producer whose initial
		// subscription keeps the dead letters stored (PIP-124); name it as the SDK's own.
		p := apulsar.DLQPolicy{MaxDeliveries: apulsar.MaxReconsumeTimes}
		if co.DLQ != nil {
			p = *co.DLQ
		}
		if p.InitialSubscriptionName == "" {
			p.InitialSubscriptionName = dlq.DefaultSubscription
		}
		co.DLQ = &p
	}
	co.SubscriptionInitialPosition = apulsar.SubscriptionPositionEarliest
	if o.InitialPosition == PositionLatest {
		co.SubscriptionInitialPosition = apulsar.SubscriptionPositionLatest
	}
	if co.ReceiverQueueSize == 0 && !co.EnableZeroQueueConsumer {
		co.ReceiverQueueSize = min(1000, 2*o.MaxInflight)
	}
	s := &Source{
		channel:       o.Channel,
		strategy:      o.FailureStrategy,
		hook:          o.DeadLetterHook,
		logger:        o.Logger,
		completeAtEnd: o.CompleteAtEnd,
		ackTimeout:    o.AckTimeout,
		reconsume:     o.ReconsumeDelay,
		timers:        map[*bqpulsar.Delivery]*time.Timer{},
		wake:          make(chan struct{}, 1),
		settled:       make(chan struct{}),
	}
	c, err := bqpulsar.NewConsumer(client, s.consumerOptions(&o, co)...)
	if err != nil {
		return nil, err
	}
	s.c = c
	if o.CompleteAtEnd {
		if err := s.recordEnds(); err != nil {
			_ = c.Close() // nothing was received: nothing to report
			return nil, err
		}
	}
	return s, nil
}

// consumerOptions returns the options of the source's Consumer: the subscription as co
// says, the contract's retries and dead letters under [FailureBabelQueue] (the gate, and
// for envelopes poison, settled at admission), and the source's own delivery hooks around
// the caller's.
func (s *Source) consumerOptions(o *SourceOptions, co apulsar.ConsumerOptions) []bqpulsar.ConsumerOption {
	contract := o.FailureStrategy == FailureBabelQueue
	topics := co.Topics
	if co.Topic != "" {
		topics = append([]string{co.Topic}, topics...)
	}
	policy := retry.Policy{MaxAttempts: o.MaxAttempts, Backoff: retry.Backoff{Initial: o.RetryDelay}}
	if contract {
		policy.Strategy = o.RetryStrategy // other strategies never retry through the policy
	}
	settler := func(pc apulsar.Consumer) seam.Settler {
		s.pc = pc
		var base seam.Settler = pc
		if o.CumulativeAck {
			s.cumulative = newCumulativeSettler(pc)
			base = s.cumulative
		}
		s.settler = &sourceSettler{base: base, pc: pc}
		return s.settler
	}
	opts := make([]bqpulsar.ConsumerOption, 0, len(topics)+16)
	for _, t := range topics {
		opts = append(opts, bqpulsar.WithTopic(t))
	}
	opts = append(opts,
		bqpulsar.WithSubscription(co.SubscriptionName, co.Type),
		bqpulsar.WithConsumerOptions(func(x *apulsar.ConsumerOptions) { *x = co }),
		bqpulsar.WithRetry(policy),
		bqpulsar.WithMaxAttempts(o.MaxAttempts),
		bqpulsar.WithDeadLetter(o.DeadLetter),
		bqpulsar.WithLogger(o.Logger),
		bqpulsar.WithMaxInflight(max(o.MaxInflight, 1)),
		bqpulsar.WithRetentionSubscription(!o.NoRetentionSubscription),
		frontOption(seam.Front{NoGate: !contract, PoisonDelivered: !contract || !o.Envelopes, Settler: settler}),
		bqpulsar.WithHooks(bqpulsar.Hooks{Delivery: s.track}), // first: in delivery order, before the gate
	)
	if o.SenderOptions != nil {
		opts = append(opts, bqpulsar.WithSenderOptions(o.SenderOptions))
	}
	if o.MaxMessageSize > 0 {
		opts = append(opts, bqpulsar.WithMaxMessageSize(o.MaxMessageSize))
	}
	for _, h := range o.Hooks {
		opts = append(opts, bqpulsar.WithHooks(h))
	}
	if o.DeadLetterHook != nil {
		opts = append(opts, bqpulsar.WithHooks(bqpulsar.Hooks{Delivery: s.deadLettered})) // last: the delivery's own context
	}
	if o.Transactions > 0 {
		opts = append(opts, bqpulsar.WithTransactions(o.Transactions))
	}
	return opts
}

// frontOption is the Consumer option of what the source changes about admission and
// settlement (seam.FrontOption, set by package pulsar, returns one).
func frontOption(f seam.Front) bqpulsar.ConsumerOption {
	o, _ := seam.FrontOption(f).(bqpulsar.ConsumerOption) // always one
	return o
}

// recordEnds stores the last message of every topic (partition) at creation, for
// CompleteAtEnd; topics without a message need not be waited for.
func (s *Source) recordEnds() error {
	ids, err := s.pc.GetLastMessageIDs()
	if err != nil {
		return fmt.Errorf("pulsar: last message ids: %w", err)
	}
	s.ends = map[string]apulsar.MessageID{}
	for _, id := range ids {
		if id.EntryID() < 0 {
			continue // empty
		}
		s.ends[id.Topic()] = id
	}
	s.atEnd = len(s.ends) == 0
	return nil
}

// reachedEnd reports whether msg is at or past its topic's recorded last message, and
// forgets that topic; it returns true once every topic reached its end.
func (s *Source) reachedEnd(msg apulsar.Message) bool {
	end, ok := s.ends[msg.Topic()]
	if !ok {
		return len(s.ends) == 0
	}
	id := msg.ID()
	past := id.LedgerID() > end.LedgerID() ||
		(id.LedgerID() == end.LedgerID() && id.EntryID() > end.EntryID()) ||
		(id.LedgerID() == end.LedgerID() && id.EntryID() == end.EntryID() &&
			(id.BatchIdx() < 0 || id.BatchIdx() >= max(end.BatchIdx(), id.BatchSize()-1)))
	if past {
		delete(s.ends, msg.Topic())
	}
	return len(s.ends) == 0
}

// track is the source's first delivery hook, called for every received message in
// delivery order (on the pump, inside Next) before admission: the cumulative settler
// records it, and complete-at-end checks it.
func (s *Source) track(ctx context.Context, msg apulsar.Message) (context.Context, func(bqpulsar.Event)) {
	if s.cumulative != nil {
		s.cumulative.track(msg)
	}
	if !s.completeAtEnd {
		return ctx, nil
	}
	s.mu.Lock()
	end := s.reachedEnd(msg)
	if end {
		s.endSeen = true
	}
	s.mu.Unlock()
	if !end {
		return ctx, nil
	}
	return ctx, s.endSettled
}

// endSettled is called when the last message is settled. Settled at admission, it was
// never delivered: the stream is at its end now, and the pump's Next, which would wait for
// a message after it, is ended.
func (s *Source) endSettled(bqpulsar.Event) {
	s.mu.Lock()
	if s.endQueued {
		s.mu.Unlock()
		return
	}
	s.atEnd = true
	stop, out := s.stopNext, s.out
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	if out != nil {
		out.Signal()
	}
}

// deadLettered is the source's last delivery hook: it calls the DeadLetterHook once a
// message was written to its dead-letter topic.
func (s *Source) deadLettered(ctx context.Context, msg apulsar.Message) (context.Context, func(bqpulsar.Event)) {
	return ctx, func(st bqpulsar.Event) {
		if st.Kind != bqpulsar.EventDeadLettered {
			return
		}
		md := metadataOf(msg, st.URN, max(st.Attempt-1, 0))
		defer func() {
			if r := recover(); r != nil {
				s.logger.Error("dead-letter hook panicked", zap.Any("panic", r))
			}
		}()
		s.hook(ctx, md, st.Err)
	}
}

// deliveryTxn is the metadata item of a message received with [SourceOptions.Transactions]:
// its delivery's transaction, which a [Sink] sending the message (or one derived from it,
// keeping its metadata) sends inside. It is unexported: only the sink reads it.
type deliveryTxn struct{ txn apulsar.Transaction }

func metadataOf(msg apulsar.Message, urn string, attempts int) IncomingMetadata {
	return IncomingMetadata{
		MessageID: msg.ID(), Topic: msg.Topic(), Key: msg.Key(), OrderingKey: msg.OrderingKey(),
		Properties: msg.Properties(), PublishTime: msg.PublishTime(), EventTime: msg.EventTime(),
		RedeliveryCount: msg.RedeliveryCount(), ProducerName: msg.ProducerName(),
		Attempts: attempts, URN: urn,
	}
}

// Subscribe implements reactive.Publisher. The source is unicast: a second subscriber
// gets OnSubscribe then OnError(reactive.ErrAlreadySubscribed); a subscriber after Close
// gets OnError wrapping messaging.ErrClosed and [bqpulsar.ErrClosed].
func (s *Source) Subscribe(sub reactive.Subscriber[messaging.Message[[]byte]]) {
	if sub == nil {
		panic(fmt.Errorf("%w: subscriber", reactive.ErrNilArgument))
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		reactive.Failed[messaging.Message[[]byte]](fmt.Errorf("%w: source %q: %w", messaging.ErrClosed, s.channel, bqpulsar.ErrClosed)).Subscribe(sub)
		return
	case s.subscribed:
		s.mu.Unlock()
		reactive.Failed[messaging.Message[[]byte]](fmt.Errorf("%w: source %q", reactive.ErrAlreadySubscribed, s.channel)).Subscribe(sub)
		return
	}
	s.subscribed = true
	ctx, cancel := context.WithCancel(context.Background())
	s.stopPump, s.pumpDone = cancel, make(chan struct{})
	out := reactive.NewOutlet(sub, s.poll, s.cancelled)
	s.out = out
	done := s.pumpDone
	s.mu.Unlock()
	go func() {
		defer close(done)
		s.pump(ctx)
	}()
	out.Start()
}

// poll is the Outlet's source: queued messages against demand, then the terminal state.
func (s *Source) poll(canEmit bool) (messaging.Message[[]byte], reactive.PollStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure != nil {
		s.stopPump()
		return nil, reactive.PollDone, s.failure
	}
	if len(s.queue) > 0 {
		if !canEmit {
			return nil, reactive.PollEmpty, nil
		}
		q := s.queue[0]
		s.queue[0] = queued{}
		s.queue = s.queue[1:]
		return q.m, reactive.PollReady, nil
	}
	if s.completeAtEnd && s.atEnd {
		s.stopPump()
		s.completed = true
		return nil, reactive.PollDone, nil
	}
	if canEmit {
		s.poke()
	}
	return nil, reactive.PollEmpty, nil
}

// poke wakes the pump without blocking.
func (s *Source) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// cancelled runs on the Outlet's drain when the subscription ends without a terminal
// from the source: stop receiving; the undelivered messages go back to the broker.
func (s *Source) cancelled() {
	s.mu.Lock()
	stop := s.stopPump
	queued := s.queue
	s.queue = nil
	s.mu.Unlock()
	stop()
	s.giveBack(queued)
}

// giveBack negatively acknowledges messages that were never delivered, so that the
// broker redelivers them; they count no attempt.
func (s *Source) giveBack(qs []queued) {
	for _, q := range qs {
		s.stopTimer(q.d)
		_ = q.d.Nack(nil) // never delivered: only a second settlement can fail, and there is none
		s.release()
	}
}

// canReceive reports whether the pump may receive: demand beyond the queue, not at the
// end and not failed. The in-flight bound is the Consumer's: Next waits for a free slot.
func (s *Source) canReceive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure != nil || (s.completeAtEnd && s.atEnd) {
		return false
	}
	return int64(len(s.queue)) < s.out.Requested()
}

// pump pulls deliveries from the Consumer while canReceive allows, until ctx ends or a
// fatal error.
func (s *Source) pump(ctx context.Context) {
	nctx := ctx
	if s.completeAtEnd {
		var stop context.CancelFunc
		nctx, stop = context.WithCancel(ctx)
		defer stop()
		s.mu.Lock()
		s.stopNext = stop
		s.mu.Unlock()
	}
	for {
		for !s.canReceive() {
			select {
			case <-s.wake:
			case <-ctx.Done():
				return
			}
		}
		d, err := s.c.Next(nctx)
		if err != nil {
			if nctx.Err() == nil && !errors.Is(err, bqpulsar.ErrClosed) {
				s.fatal(err)
			}
			return
		}
		s.accept(d) //nolint:contextcheck // the ack timeout outlives the pump's ctx by design
	}
}

// accept queues an admitted delivery for the subscriber (a bq-schema-version rejection
// and, for envelopes, poison were settled by the Consumer and never get here).
func (s *Source) accept(d *bqpulsar.Delivery) {
	msg := d.Message()
	// The delivery's context goes with the message: the stage functions get its values
	// (the consumer span of a tracing hook, say) and so does the sink's publish hook.
	md := messaging.NewMetadata(metadataOf(msg, d.URN(), d.Attempt()-1), messaging.ContextMetadata{Context: d.Context()})
	if txn := seam.TxnOf(d.Context()); txn != nil {
		md = md.With(deliveryTxn{txn: txn})
	}
	var continued atomic.Bool // nacked under continue: the slot is free, the timeout redelivers
	m := messaging.NewMessage(msg.Payload(),
		messaging.WithMetadata(md),
		messaging.WithAckFunc(func(context.Context) error {
			s.stopTimer(d)
			err := d.Ack()
			s.release()
			return err
		}),
		messaging.WithNackFunc(func(_ context.Context, reason error, o messaging.NackOptions) error {
			if s.strategy == FailureContinue && !errors.Is(reason, messaging.ErrSettleTimeout) {
				s.logger.Warn("nacked message left unacknowledged until the ack timeout (failure-strategy continue)",
					zap.String("channel", s.channel), zap.Error(reason))
				continued.Store(true)
				s.settler.mark.Store(msg, nackMark{leave: true})
				_ = d.Nack(reason) // frees the Consumer's slot; the settler leaves the message unacknowledged
				s.release()
				return nil
			}
			s.stopTimer(d)
			s.settleNack(d, reason, o)
			s.release()
			return nil
		}))
	s.mu.Lock()
	s.open++
	if s.endSeen {
		s.endQueued, s.atEnd = true, true
	}
	s.mu.Unlock()
	if s.ackTimeout > 0 {
		s.startTimer(d, m, &continued)
	}
	s.mu.Lock()
	s.queue = append(s.queue, queued{m: m, d: d})
	out := s.out
	s.mu.Unlock()
	out.Signal()
}

// startTimer arms the ack timeout of a received message.
func (s *Source) startTimer(d *bqpulsar.Delivery, m messaging.Message[[]byte], continued *atomic.Bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timers[d] = time.AfterFunc(s.ackTimeout, func() {
		if continued.Load() {
			s.mu.Lock()
			delete(s.timers, d)
			s.mu.Unlock()
			s.settler.base.Nack(d.Message()) // redeliver; the slot was freed by the nack
			return
		}
		reason := fmt.Errorf("%w: unsettled after %s on channel %q", messaging.ErrSettleTimeout, s.ackTimeout, s.channel)
		if err := m.Nack(context.Background(), reason); err != nil && !errors.Is(err, messaging.ErrAlreadySettled) {
			s.logger.Warn("ack timeout nack failed", zap.String("channel", s.channel), zap.Error(err))
		}
	})
}

// stopTimer disarms the ack timeout of a settled message.
func (s *Source) stopTimer(d *bqpulsar.Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.timers[d]; ok {
		t.Stop()
		delete(s.timers, d)
	}
}

// release counts a message settled by the stage (or given back) and wakes the pump.
func (s *Source) release() {
	s.mu.Lock()
	s.open--
	close(s.settled)
	s.settled = make(chan struct{})
	out := s.out
	s.mu.Unlock()
	s.poke()
	if out != nil {
		out.Signal()
	}
}

// fatal records a fatal failure: not live, OnError downstream, no more receives.
func (s *Source) fatal(err error) {
	s.mu.Lock()
	if s.failure == nil {
		s.failure = err
	}
	out, stop := s.out, s.stopPump
	s.mu.Unlock()
	s.logger.Error("source failed", zap.String("channel", s.channel), zap.Error(err))
	if stop != nil {
		stop()
	}
	if out != nil {
		out.Signal()
	}
}

// InFlight returns the number of received, unsettled messages (those not yet delivered
// included).
func (s *Source) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

// Health reports the source's health: started once subscribed, live until a fatal failure,
// Close or the end of a complete-at-end stream (then Completed), ready while live and the
// Consumer's last receive, acknowledgement and settlement write succeeded; Reason joins
// the Consumer's reasons.
func (s *Source) Health() messaging.ChannelHealth {
	eh := s.c.Health()
	s.mu.Lock()
	defer s.mu.Unlock()
	h := messaging.ChannelHealth{Channel: s.channel, Direction: messaging.Incoming, Started: true}
	// A stream that completed has ended: not live, and that is its only reason when
	// nothing failed (the runtime accepts it during its shutdown drain).
	h.Completed = s.completed && s.failure == nil
	h.Live = s.failure == nil && eh.Live && !s.completed
	h.Ready = h.Live && eh.Ready && !s.closed
	reasons := eh.Reasons
	if s.failure != nil && len(reasons) == 0 {
		reasons = []string{s.failure.Error()}
	}
	h.Reason = strings.Join(reasons, "; ")
	return h
}

// Close stops receiving, waits until the delivered messages are settled or ctx ends,
// then closes the Consumer (its retry and dead-letter producers, and the subscription;
// what is still unsettled is negatively acknowledged). It is idempotent; the first call's
// error (ctx's, wrapped, with the unsettled count) is returned only by that call.
func (s *Source) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		stop, done := s.stopPump, s.pumpDone
		queued := s.queue
		s.queue = nil
		s.mu.Unlock()
		if stop != nil {
			stop()
			<-done
		}
		s.giveBack(queued)
		err = s.awaitSettled(ctx)
		s.mu.Lock()
		for d, t := range s.timers {
			t.Stop()
			delete(s.timers, d)
		}
		s.mu.Unlock()
		if cerr := s.c.Close(); cerr != nil && !errors.Is(cerr, bqpulsar.ErrUnsettled) {
			err = errors.Join(err, cerr) // the unsettled ones are counted in err already
		}
	})
	return err
}

func (s *Source) awaitSettled(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, ch := s.open, s.settled
		s.mu.Unlock()
		if n <= 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("pulsar: source %q closed with %d unsettled messages: %w", s.channel, n, ctx.Err())
		}
	}
}
