package inmemory_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

var tckOptions = tck.Options{
	DefaultTimeout:   2 * time.Second,
	NoSignalsTimeout: 25 * time.Millisecond,
	PollTimeout:      10 * time.Millisecond,
	GCTimeout:        50 * time.Millisecond,
	MaxSubscribers:   1,
}

// newTCKSource is a source created by the connector (max-inflight as large
// as the TCK's streams: the TCK never settles).
func newTCKSource(t *testing.T) (*inmemory.Source, messaging.Source) {
	t.Helper()
	c := inmemory.New()
	src, err := c.NewSource(context.Background(), cfg(c, "tck", messaging.Incoming, map[string]string{"max-inflight": "2147483647"}))
	require.NoError(t, err)
	return c.Source("tck"), src
}

// TestTCK_Source: n messages, prefilled for small n; larger streams (up to
// the math.MaxInt32 of required_spec317) come from a feeder that keeps at
// most 64 messages queued and stops at the end of the test.
func TestTCK_Source(t *testing.T) {
	tck.VerifyPublisher(t, tck.PublisherFactory[messaging.Message[[]byte]]{
		Create: func(t *testing.T, n int64) reactive.Publisher[messaging.Message[[]byte]] {
			t.Helper()
			h, src := newTCKSource(t)
			if n <= 1024 {
				for i := range n {
					h.SendString(strconv.FormatInt(i, 10))
				}
				h.Complete()
				return src
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := int64(0); n == reactive.Unbounded || i < n; {
					if i-int64(h.InFlight()) >= 64 {
						select {
						case <-stop:
							return
						case <-time.After(50 * time.Microsecond):
						}
						continue
					}
					h.SendString(strconv.FormatInt(i, 10))
					i++
				}
				h.Complete()
			})
			t.Cleanup(func() { close(stop); wg.Wait() })
			return src
		},
		CreateFailed: func(t *testing.T) reactive.Publisher[messaging.Message[[]byte]] {
			t.Helper()
			_, src := newTCKSource(t)
			require.NoError(t, src.Close(t.Context()))
			return src
		},
	}, tckOptions)
}

func TestTCK_SinkBlackbox(t *testing.T) {
	tck.VerifySubscriberBlackbox(t, tck.BlackboxFactory[messaging.Message[[]byte]]{
		Create: func(t *testing.T) reactive.Subscriber[messaging.Message[[]byte]] {
			t.Helper()
			c := inmemory.New()
			sink, err := c.NewSink(context.Background(), cfg(c, "tck", messaging.Outgoing, nil))
			require.NoError(t, err)
			return sink
		},
		Element: func(i int) messaging.Message[[]byte] { return messaging.NewMessage([]byte(strconv.Itoa(i))) },
	}, tckOptions)
}
