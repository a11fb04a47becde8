package messaging_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// slowConnector is the in-memory connector whose sources report Started only
// once ready is set, like a broker consumer created asynchronously.
type slowConnector struct {
	*inmemory.Connector
	ready  *atomic.Bool
	closed atomic.Int32
}

func (c *slowConnector) NewSource(ctx context.Context, cfg messaging.ChannelConfig) (messaging.Source, error) {
	s, err := c.Connector.NewSource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &slowSource{Source: s, c: c}, nil
}

type slowSource struct {
	messaging.Source
	c *slowConnector
}

func (s *slowSource) Health() messaging.ChannelHealth {
	h := s.Source.Health()
	if !s.c.ready.Load() {
		h.Started, h.Ready, h.Reason = false, false, "consumer not created yet"
	}
	return h
}

func (s *slowSource) Close(ctx context.Context) error {
	s.c.closed.Add(1)
	return s.Source.Close(ctx)
}

func newSlowRuntime(t *testing.T) (*messaging.Runtime, *slowConnector) {
	t.Helper()
	conn := &slowConnector{Connector: inmemory.New(), ready: &atomic.Bool{}}
	cfg, err := messaging.LoadConfig(messaging.FromMap(map[string]string{"mp.messaging.incoming.in.connector": "in-memory"}))
	require.NoError(t, err)
	rt := messaging.New(cfg, messaging.WithConnector(conn))
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	messaging.Consume(rt, "in", nop[[]byte])
	return rt, conn
}

// Start returns only once every channel started.
func TestStart_WaitsUntilEveryChannelStarted(t *testing.T) {
	rt, conn := newSlowRuntime(t)
	done := make(chan error, 1)
	go func() { done <- rt.Start(testCtx(t)) }()
	select {
	case err := <-done:
		t.Fatalf("Start returned %v before the source started", err)
	case <-time.After(30 * time.Millisecond):
	}
	h := rt.Health()
	assert.False(t, h.Started, "not started while Start waits")
	assert.False(t, h.Ready)
	conn.ready.Store(true)
	require.NoError(t, <-done)
	h = rt.Health()
	assert.True(t, h.Started)
	assert.True(t, h.Ready)
}

// A channel not started within Start's ctx fails Start, names the channel
// and releases what was created.
func TestStart_ChannelNotStartedWithinCtx(t *testing.T) {
	rt, conn := newSlowRuntime(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	err := rt.Start(ctx)
	require.ErrorIs(t, err, messaging.ErrNotStarted)
	require.ErrorIs(t, err, messaging.ErrConnectorInit)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "in (incoming): consumer not created yet")
	assert.Equal(t, int32(1), conn.closed.Load(), "the source was closed")
	assert.False(t, rt.Health().Started)
	require.ErrorIs(t, rt.Start(t.Context()), messaging.ErrClosed, "a failed runtime cannot be restarted")
	require.NoError(t, rt.Shutdown(t.Context()))
	<-rt.Done()
}

// A Channel's stream is started when its subscriber saw OnSubscribe, which
// may come after Start; the runtime verdict Started then stays true, also
// after a channel failed.
func TestHealth_ChannelStartedWhenSubscribedAndStartedStays(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	pub := messaging.Channel[[]byte](rt, "in")
	start(t, rt)
	h := rt.Health()
	assert.False(t, h.Started, "Channel not subscribed yet")
	require.Len(t, h.Channels, 1)
	col := &byteCollector{}
	pub.Subscribe(col)
	h = rt.Health()
	assert.True(t, h.Started)
	assert.True(t, h.Ready)
	conn.Source("in").Fail(errBoom)
	testwait.Eventually(t, waitTimeout, func() bool { return !rt.Health().Live }, "not live")
	assert.True(t, rt.Health().Started, "Started stays true")
}

type byteCollector struct{ n atomic.Int32 }

func (*byteCollector) OnSubscribe(s reactive.Subscription) { s.Request(1) }
func (c *byteCollector) OnNext(messaging.Message[[]byte])  { c.n.Add(1) }
func (*byteCollector) OnError(error)                       {}
func (*byteCollector) OnComplete()                         {}
