package pulsar

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/mocks"
)

// TestHooksKnowTheConsumerAndSeeItsOwnWrites: a Delivery hook's context and the handler's
// name the consumer (ConsumerInfoFrom) before any event does, and the Publish hooks see the
// consumer's retry republish and dead-letter copy as sends, with their outcome: the
// receipt's id, or the write's error.
func TestHooksKnowTheConsumerAndSeeItsOwnWrites(t *testing.T) {
	t.Parallel()
	type write struct {
		topic       string
		partitioned bool
		urn         string
		id          apulsar.MessageID
		err         error
	}
	var (
		mu      sync.Mutex
		infos   []ConsumerInfo
		writes  []write
		noInfos int
	)
	info := func(ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		if i, ok := ConsumerInfoFrom(ctx); ok {
			infos = append(infos, i)
		} else {
			noInfos++
		}
	}
	h := newHarness(t, Handle(testURN, func(ctx context.Context, _ *envelope.Envelope, _ apulsar.Message) error {
		info(ctx)
		return errors.New("declined")
	}), WithMaxAttempts(2), WithHooks(Hooks{
		Delivery: func(ctx context.Context, _ apulsar.Message) (context.Context, func(Event)) {
			info(ctx)
			return ctx, nil
		},
		Publish: func(_ context.Context, m *OutgoingMessage) func(apulsar.MessageID, error) {
			w := write{topic: m.Topic, partitioned: m.Partitioned}
			if m.Envelope != nil {
				w.urn = m.Envelope.URN()
			}
			return func(id apulsar.MessageID, err error) {
				w.id, w.err = id, err
				mu.Lock()
				defer mu.Unlock()
				writes = append(writes, w)
			}
		},
	}))

	first, _ := newMessage(t, testURN, 0, 0)
	h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).Return(apulsar.EarliestMessageID(), nil)
	h.settler.EXPECT().Ack(first).Return(nil)
	h.process(first)

	second, _ := newMessage(t, testURN, 1, 0)
	down := errors.New("dead-letter topic down")
	h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil, down)
	h.settler.EXPECT().Nack(second)
	h.process(second)

	h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).Return(apulsar.LatestMessageID(), nil)
	h.settler.EXPECT().Ack(second).Return(nil)
	h.process(second)

	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, noInfos, "every hook and handler context names the consumer")
	want := ConsumerInfo{Subscription: "sub", Type: apulsar.Shared}
	require.Len(t, infos, 6, "three deliveries, each seen by the Delivery hook and the handler")
	for _, i := range infos {
		assert.Equal(t, want, i)
	}
	require.Len(t, writes, 3)
	// The message came from a partition: its retry goes to the partitioned parent, whose
	// producer picks the partition; the dead-letter topic is not known to be partitioned.
	assert.Equal(t, write{topic: testParent, partitioned: true, urn: testURN, id: apulsar.EarliestMessageID()}, writes[0])
	assert.Equal(t, testDLQ, writes[1].topic)
	assert.False(t, writes[1].partitioned)
	require.ErrorIs(t, writes[1].err, down, "the failed write's outcome is its error")
	assert.Nil(t, writes[1].id)
	assert.Equal(t, write{topic: testDLQ, urn: testURN, id: apulsar.LatestMessageID()}, writes[2])
}

func TestConsumerInfoFromAnotherContextIsNotOK(t *testing.T) {
	t.Parallel()
	_, ok := ConsumerInfoFrom(context.Background())
	assert.False(t, ok)
	_, ok = ConsumerInfoFrom(nil) //nolint:staticcheck // a nil context is refused, not a panic
	assert.False(t, ok)
}

// TestRunContextsNameTheConsumer: under Run, at concurrency 1 and 4, every Delivery hook's
// and handler's context names the consumer, for every message, the ones handled with a
// delivery reused from an earlier one included (Run derives that context once, not
// admission per message).
func TestRunContextsNameTheConsumer(t *testing.T) {
	t.Parallel()
	for _, concurrency := range []int{1, 4} {
		t.Run(fmt.Sprintf("concurrency=%d", concurrency), func(t *testing.T) {
			t.Parallel()
			const n = 20
			var named, unnamed, handled atomic.Int64
			check := func(ctx context.Context) {
				if i, ok := ConsumerInfoFrom(ctx); ok && i == (ConsumerInfo{Subscription: "sub", Type: apulsar.Shared}) {
					named.Add(1)
				} else {
					unnamed.Add(1)
				}
			}
			all := make(chan struct{})
			h := newHarness(t, WithConcurrency(concurrency), Handle(testURN, func(ctx context.Context, _ *envelope.Envelope, _ apulsar.Message) error {
				check(ctx)
				if handled.Add(1) == n {
					close(all)
				}
				return nil
			}), WithHooks(Hooks{Delivery: func(ctx context.Context, _ apulsar.Message) (context.Context, func(Event)) {
				check(ctx)
				return ctx, nil
			}}))
			recv := mocks.NewMockReceiver(h.ctrl)
			h.c.recv = recv
			msgs := make([]apulsar.Message, n)
			for i := range msgs {
				msgs[i], _ = newMessage(t, testURN, 0, 0)
			}
			feed(recv, msgs...)
			h.settler.EXPECT().Ack(gomock.Any()).Return(nil).Times(n)
			h.runUntil(all)
			assert.Equal(t, int64(2*n), named.Load(), "each message's hook and handler name the consumer")
			assert.Zero(t, unnamed.Load())
		})
	}
}
