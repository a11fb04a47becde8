package messaging_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// channelHealth returns the runtime's view of channel ch in direction d.
func channelHealth(t *testing.T, rt *messaging.Runtime, ch string, d messaging.Direction) messaging.ChannelHealth {
	t.Helper()
	for _, c := range rt.Health().Channels {
		if c.Channel == ch && c.Direction == d {
			return c
		}
	}
	t.Fatalf("no health entry for channel %q (%v)", ch, d)
	return messaging.ChannelHealth{}
}

// Health rule: an OnComplete makes a connector channel not live (and not
// ready); the runtime verdict and the connector's own Health agree.
func TestHealth_CompletedIncomingConnectorChannelIsNotLive(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	got := make(chan string, 1)
	messaging.Consume(rt, "in", func(_ context.Context, p string) error { got <- p; return nil })
	start(t, rt)
	require.True(t, rt.Health().Live)
	src := conn.Source("in")
	src.SendString("last")
	src.Complete()
	assert.Equal(t, "last", <-got)
	testwait.Eventually(t, waitTimeout, func() bool { return !rt.Health().Live }, "a completed connector channel is not live")
	h := channelHealth(t, rt, "in", messaging.Incoming)
	assert.False(t, h.Live)
	assert.False(t, h.Ready)
	assert.Contains(t, h.Reason, "completed")
	own := src.Health()
	assert.False(t, own.Live, "the in-memory source itself reports the completion")
	assert.False(t, own.Ready)
	assert.True(t, own.Completed)
}

func TestHealth_CompletedOutgoingConnectorChannelIsNotLive(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.outgoing.out.connector": "in-memory"})
	messaging.Produce(rt, "out", reactive.FromSlice(messaging.NewMessage("a"), messaging.NewMessage("b")))
	start(t, rt)
	sink := conn.Sink("out")
	require.NoError(t, sink.Wait(testCtx(t), 2))
	testwait.Eventually(t, waitTimeout, func() bool { return !rt.Health().Live }, "a completed connector channel is not live")
	assert.Contains(t, channelHealth(t, rt, "out", messaging.Outgoing).Reason, "completed")
	assert.False(t, sink.Health().Live, "the in-memory sink itself reports the completion")
}

// Run returns ErrChannelFailed when a connector channel completes.
func TestHealth_RunStopsWhenConnectorChannelCompletes(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	messaging.Consume(rt, "in", nop[[]byte])
	conn.Source("in").Complete()
	err := rt.Run(testCtx(t))
	require.ErrorIs(t, err, messaging.ErrChannelFailed)
	assert.ErrorContains(t, err, "completed")
}

// An internal channel whose producer completed stays live.
func TestHealth_CompletedInternalChannelStaysLive(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	got := make(chan int, 2)
	messaging.Produce(rt, "a", reactive.FromSlice(messaging.NewMessage(1), messaging.NewMessage(2)))
	messaging.Consume(rt, "a", func(_ context.Context, v int) error { got <- v; return nil })
	start(t, rt)
	<-got
	<-got
	h := channelHealth(t, rt, "a", 0)
	assert.True(t, h.Live)
	assert.True(t, rt.Health().Live)
}

// The completions of the drain are the orderly end: during and after
// Shutdown a connector channel that reports only its completion is live.
func TestHealth_ShutdownCompletionKeepsConnectorChannelsLive(t *testing.T) {
	conn := completingConnector{inmemory.New()}
	cfg, err := messaging.LoadConfig(messaging.FromMap(map[string]string{"mp.messaging.outgoing.out.connector": "in-memory"}))
	require.NoError(t, err)
	rt := messaging.New(cfg, messaging.WithConnector(conn))
	em := messaging.NewEmitter[string](rt, "out")
	start(t, rt)
	require.NoError(t, em.Send(testCtx(t), "x"))
	require.NoError(t, rt.Shutdown(testCtx(t)))
	h := channelHealth(t, rt, "out", messaging.Outgoing)
	assert.True(t, h.Completed, "premise: the sink reports its completion")
	assert.True(t, h.Live, "%+v", h)
	assert.True(t, rt.Health().Live)
	assert.False(t, rt.Health().Ready)
}

// completingConnector's sinks report a completion once closed, as a sink
// whose OnComplete arrived in the drain.
type completingConnector struct{ *inmemory.Connector }

func (c completingConnector) NewSink(ctx context.Context, cfg messaging.ChannelConfig) (messaging.Sink, error) {
	s, err := c.Connector.NewSink(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &completingSink{Sink: s}, nil
}

type completingSink struct {
	messaging.Sink
	closed atomic.Bool
}

func (s *completingSink) Close(ctx context.Context) error {
	s.closed.Store(true)
	return s.Sink.Close(ctx)
}

func (s *completingSink) Health() messaging.ChannelHealth {
	h := s.Sink.Health()
	if s.closed.Load() {
		h.Completed, h.Live, h.Ready = true, false, false
	}
	return h
}

// Health rule: a Subscribe subscriber that cancels outside Shutdown leaves
// its channel not live.
func TestHealth_SubscribeCancelOutsideShutdownIsNotLive(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	sub := &cancellingSubscriber{after: 1, done: make(chan struct{})}
	messaging.Subscribe[string](rt, "in", sub, messaging.WithAck(messaging.AckPost))
	start(t, rt)
	require.True(t, rt.Health().Live)
	conn.Source("in").SendString("one")
	<-sub.done
	testwait.Eventually(t, waitTimeout, func() bool { return !rt.Health().Live }, "a cancelled channel is not live")
	h := channelHealth(t, rt, "in", messaging.Incoming)
	assert.False(t, h.Live)
	assert.Contains(t, h.Reason, messaging.ErrStreamCancelled.Error())
}

// A Channel subscriber cancelling is recorded the same way.
func TestHealth_ChannelSubscriberCancelIsNotLive(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	sub := &cancellingSubscriber{after: 1, done: make(chan struct{})}
	messaging.Channel[string](rt, "in").Subscribe(sub)
	start(t, rt)
	conn.Source("in").SendString("one")
	<-sub.done
	testwait.Eventually(t, waitTimeout, func() bool { return !rt.Health().Live }, "a cancelled channel is not live")
}

// A cancel during Shutdown (here: from OnComplete of the drain) is not a failure.
func TestHealth_SubscribeCancelDuringShutdownStaysLive(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "a")
	sub := &cancellingSubscriber{after: -1, done: make(chan struct{})}
	messaging.Subscribe[string](rt, "a", sub)
	start(t, rt)
	require.NoError(t, em.Send(testCtx(t), "x"))
	require.NoError(t, rt.Shutdown(testCtx(t)))
	assert.True(t, rt.Health().Live, "%+v", rt.Health().Channels)
}

// cancellingSubscriber requests one at a time, acks what it receives and
// cancels after `after` elements (after < 0: on OnComplete).
type cancellingSubscriber struct {
	after int
	n     int
	sub   reactive.Subscription
	done  chan struct{}
}

func (c *cancellingSubscriber) OnSubscribe(s reactive.Subscription) { c.sub = s; s.Request(1) }

func (c *cancellingSubscriber) OnNext(m messaging.Message[string]) {
	_ = m.Ack(context.Background())
	c.n++
	if c.n == c.after {
		c.sub.Cancel()
		close(c.done)
		return
	}
	c.sub.Request(1)
}

func (*cancellingSubscriber) OnError(error) {}

func (c *cancellingSubscriber) OnComplete() {
	if c.after < 0 {
		c.sub.Cancel()
	}
}

// forgetfulConnector is the in-memory connector whose endpoints always
// report live: the runtime must observe a completion on its own.
type forgetfulConnector struct{ *inmemory.Connector }

func (c forgetfulConnector) NewSource(ctx context.Context, cfg messaging.ChannelConfig) (messaging.Source, error) {
	s, err := c.Connector.NewSource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return forgetfulSource{s}, nil
}

type forgetfulSource struct{ messaging.Source }

func (s forgetfulSource) Health() messaging.ChannelHealth {
	h := s.Source.Health()
	h.Live, h.Ready, h.Completed, h.Reason = true, true, false, ""
	return h
}

func TestHealth_RuntimeObservesCompletionTheConnectorDoesNotReport(t *testing.T) {
	conn := forgetfulConnector{inmemory.New()}
	cfg, err := messaging.LoadConfig(messaging.FromMap(map[string]string{"mp.messaging.incoming.in.connector": "in-memory"}))
	require.NoError(t, err)
	rt := messaging.New(cfg, messaging.WithConnector(conn))
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	messaging.Consume(rt, "in", nop[[]byte])
	start(t, rt)
	conn.Source("in").Complete()
	testwait.Eventually(t, waitTimeout, func() bool { return !rt.Health().Live }, "the runtime records the completion")
	assert.Contains(t, channelHealth(t, rt, "in", messaging.Incoming).Reason, messaging.ErrStreamCompleted.Error())
}

func TestEndpointHealth_Rules(t *testing.T) {
	h := messaging.NewEndpointHealth("orders", messaging.Incoming)
	assert.Equal(t, messaging.ChannelHealth{Channel: "orders", Direction: messaging.Incoming, Live: true}, h.Health())
	h.MarkStarted()
	assert.True(t, h.Health().Ready)
	h.MarkConnectionFailed(errBoom)
	c := h.Health()
	assert.True(t, c.Live)
	assert.False(t, c.Ready, "a connection-class failure drops readiness")
	assert.Contains(t, c.Reason, errBoom.Error())
	h.MarkConnected()
	assert.True(t, h.Health().Ready, "a successful interaction restores readiness")
	h.MarkCompleted()
	c = h.Health()
	assert.False(t, c.Live)
	assert.False(t, c.Ready)
	assert.True(t, c.Completed)
	h.MarkFailed(errBoom)
	assert.False(t, h.Health().Completed, "a fatal failure is not excused by Shutdown")

	closed := messaging.NewEndpointHealth("out", messaging.Outgoing)
	closed.MarkStarted()
	closed.MarkClosed()
	closed.MarkCompleted()
	c = closed.Health()
	assert.True(t, c.Live, "a completion caused by Close is the orderly end")
	assert.False(t, c.Ready)
	assert.Panics(t, func() { closed.MarkFailed(nil) })
}

// An endpoint keeps its reasons newest first, at most 10: of twelve failures, the last ten
// are reported, the newest first.
func TestEndpointHealth_ReasonsNewestFirstAtMostTen(t *testing.T) {
	h := messaging.NewEndpointHealth("orders", messaging.Incoming)
	for i := 1; i <= 12; i++ {
		h.MarkConnectionFailed(fmt.Errorf("failure %d", i))
	}
	var want []string
	for i := 12; i >= 3; i-- {
		want = append(want, fmt.Sprintf("failure %d", i))
	}
	assert.Equal(t, strings.Join(want, "; "), h.Health().Reason)
}
