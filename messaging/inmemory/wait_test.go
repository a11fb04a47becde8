package inmemory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// WaitSettled wakes every waiter at its own target. The waiters share one channel, made for
// the lowest target: a waiter with a lower target than the channel's closes it (waking the
// others, who wait again) and makes its own. The test reads that target, under the handle's
// lock, to know that a waiter is waiting: the waiting itself is not observable.
func TestWaitSettledWakesEachWaiterAtItsTarget(t *testing.T) {
	const within = 10 * time.Second
	s := New().Source("in")
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	target := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.settledCh == nil {
			return 0
		}
		return s.settledAt
	}
	wait := func(n int) <-chan error {
		done := make(chan error, 1)
		go func() { done <- s.WaitSettled(ctx, n) }()
		return done
	}
	ack := func() {
		t.Helper()
		require.NoError(t, s.wrap(pendingMsg{payload: []byte("m")}).Ack(ctx))
	}

	high := wait(3)
	testwait.Eventually(t, within, func() bool { return target() == 3 }, "the first waiter waits for 3")
	low := wait(1)
	testwait.Eventually(t, within, func() bool { return target() == 1 }, "the second waiter waits for 1")
	ack()
	require.NoError(t, <-low, "woken at its target")
	ack()
	ack()
	require.NoError(t, <-high, "woken at its target, after the other's")

	done, cancelDone := context.WithCancel(t.Context())
	cancelDone()
	require.NoError(t, s.WaitSettled(done, 3), "a target reached returns at once")
	err := s.WaitSettled(done, 4)
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "3 of 4 settlements")
}

// waiting reports whether a Wait of s waits: it made the channel that a change closes. (A
// Wait that returned leaves it too: the tests ask only before their first Wait.)
func waiting(s *Sink) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed != nil
}

// Sink.Wait, begun before the messages or the end of the stream arrive, wakes as they are
// recorded; a Wait for more messages than the stream had answers its end. The block drains
// at that end before the handle records the completion, which Wait must not miss. The test
// reads the channel that Wait makes to know that Wait waits.
func TestSinkWaitWakesAsTheMessagesAndTheEndArrive(t *testing.T) {
	const within = 10 * time.Second
	for _, tc := range []struct {
		name string
		n    int
		end  bool
		err  string
	}{
		{"two messages", 2, false, ""},
		{"one message and the end", 2, true, "ended after 1 of 2 messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New().Sink("out")
			ch := make(chan messaging.Message[[]byte], 2)
			defer func() {
				if !tc.end {
					close(ch)
				}
			}()
			reactive.FromChan(ch).Subscribe(s)
			ctx, cancel := context.WithTimeout(t.Context(), within)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- s.Wait(ctx, tc.n) }()
			testwait.Eventually(t, within, func() bool { return waiting(s) }, "Wait waits")
			ch <- messaging.NewMessage([]byte("a"))
			if tc.end {
				close(ch)
			} else {
				ch <- messaging.NewMessage([]byte("b"))
			}
			err := <-done
			if tc.err == "" {
				require.NoError(t, err)
				assert.Equal(t, []string{"a", "b"}, s.Payloads())
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// nopSubscription is an upstream that the test drives itself.
type nopSubscription struct{}

func (nopSubscription) Request(int64) {}
func (nopSubscription) Cancel()       {}

// After a Close, which is no end of the stream, a Wait for more messages waits; when the
// terminal signal comes (the upstream's, crossing the cancel), Wait answers the end.
func TestSinkWaitAnswersAnEndAfterAClose(t *testing.T) {
	const within = 10 * time.Second
	s := New().Sink("out")
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	s.OnSubscribe(nopSubscription{})
	s.OnNext(messaging.NewMessage([]byte("a")))
	require.NoError(t, s.Close(ctx))

	done := make(chan error, 1)
	go func() { done <- s.Wait(ctx, 2) }()
	testwait.Eventually(t, within, func() bool { return waiting(s) }, "Wait waits")
	expired, cancelExpired := context.WithCancel(ctx)
	cancelExpired()
	require.ErrorIs(t, s.Wait(expired, 2), context.Canceled, "a Close ends no stream")
	s.OnComplete()
	require.ErrorContains(t, <-done, "ended after 1 of 2 messages")
}
