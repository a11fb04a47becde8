package connector_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

// countingElement is a message whose settlements are counted, for the sink TCK runs.
func countingElement(acks, nacks *atomic.Int64) func(i int) bytesMsg {
	return func(i int) bytesMsg {
		return messaging.NewMessage(fmt.Appendf(nil, "e-%d", i),
			messaging.WithAckFunc(func(context.Context) error { acks.Add(1); return nil }),
			messaging.WithNackFunc(func(context.Context, error, messaging.NackOptions) error { nacks.Add(1); return nil }))
	}
}

func newTestSink(t *testing.T, client apulsar.Client, window int) *connector.Sink {
	t.Helper()
	s, err := connector.NewSink(client, connector.SinkOptions{
		Producer: apulsar.ProducerOptions{Topic: uniqueTopic(t, "sink")},
		Window:   window,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Close(ctx))
	})
	return s
}

func TestTCK_SinkBlackbox(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	var acks, nacks atomic.Int64
	tck.VerifySubscriberBlackbox(t, tck.BlackboxFactory[bytesMsg]{
		Create: func(t *testing.T) reactive.Subscriber[bytesMsg] {
			t.Helper()
			return newTestSink(t, client, 16)
		},
		Element: countingElement(&acks, &nacks),
	}, tckBrokerOptions)
	require.Positive(t, acks.Load(), "the sink acked sent messages")
	require.Zero(t, nacks.Load(), "no send failed")
}

// whiteboxSink forwards the signals of a Sink to the TCK's probe; the puppet drives the
// sink's own upstream requests through the test hook.
type whiteboxSink struct {
	*connector.Sink
	probe *tck.Probe[bytesMsg]
}

func (w whiteboxSink) OnSubscribe(s reactive.Subscription) {
	w.Sink.OnSubscribe(s)
	w.probe.RegisterOnSubscribe(sinkPuppet{w.Sink})
}

func (w whiteboxSink) OnNext(m bytesMsg) {
	w.Sink.OnNext(m)
	w.probe.RegisterOnNext(m)
}

func (w whiteboxSink) OnError(err error) {
	w.Sink.OnError(err)
	w.probe.RegisterOnError(err)
}

func (w whiteboxSink) OnComplete() {
	w.Sink.OnComplete()
	w.probe.RegisterOnComplete()
}

type sinkPuppet struct{ s *connector.Sink }

func (p sinkPuppet) TriggerRequest(n int64) { connector.SinkRequest(p.s, n) }
func (p sinkPuppet) SignalCancel()          { connector.SinkCancel(p.s) }

func TestTCK_SinkWhitebox(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	var acks, nacks atomic.Int64
	tck.VerifySubscriberWhitebox(t, tck.WhiteboxFactory[bytesMsg]{
		Create: func(t *testing.T, p *tck.Probe[bytesMsg]) reactive.Subscriber[bytesMsg] {
			t.Helper()
			// The window is requested at OnSubscribe; a window of 1 keeps the TCK's own
			// requests meaningful (it checks what its puppet requests).
			return whiteboxSink{Sink: newTestSink(t, client, 1), probe: p}
		},
		Element: countingElement(&acks, &nacks),
	}, tckBrokerOptions)
	require.Zero(t, nacks.Load(), "no send failed")
}
