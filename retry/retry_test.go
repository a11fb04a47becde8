package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"canceled", context.Canceled, false},
		{"canceled wrapped", fmt.Errorf("send: %w", context.Canceled), false},
		{"deadline", context.DeadlineExceeded, true},
		{"deadline joined with a connection error", errors.Join(context.DeadlineExceeded, errors.New("connection error")), true},
		{"send timeout", apulsar.ErrSendTimeout, true},
		{"send timeout wrapped", fmt.Errorf("publish: %w", apulsar.ErrSendTimeout), true},
		{"context expired", apulsar.ErrContextExpired, true},
		{"queue full", apulsar.ErrSendQueueIsFull, true},
		{"memory buffer full", apulsar.ErrMemoryBufferIsFull, true},
		{"producer closed", apulsar.ErrProducerClosed, false},
		{"message too large", apulsar.ErrMessageTooLarge, false},
		{"topic not found", apulsar.ErrTopicNotfound, false},
		{"topic terminated", apulsar.ErrTopicTerminated, false},
		{"fenced", apulsar.ErrProducerFenced, false},
		{"schema", apulsar.ErrSchema, false},
		{"invalid message", apulsar.ErrInvalidMessage, false},
		{"eof", io.EOF, true},
		{"unexpected eof", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"net op error", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"plain error", errors.New("boom"), false},
		// A broker's error answer, as pulsar-client-go v0.21.0 (and v0.19.0) passes it on (plain text).
		{"server: topic being unloaded", errors.New("server error: ServiceNotReady: Topic is temporarily unavailable"), true},
		{"server: wrapped", fmt.Errorf("subscribe: %w", errors.New("server error: TooManyRequests: Failed due to too many pending lookup requests")), true},
		{"server: metadata", errors.New("server error: MetadataError: x"), true},
		{"server: persistence", errors.New("server error: PersistenceError: x"), true},
		{"server: exclusive consumer held", errors.New("server error: ConsumerBusy: Exclusive consumer is already connected"), false},
		{"server: not authorised", errors.New("server error: AuthorizationError: Client is not authorized"), false},
		{"server: no name", errors.New("server error: : x"), false},
		{"server: not a name", errors.New("server error: Service NotReady: x"), false},
		{"server: no colon", errors.New("server error: ServiceNotReady"), false},
		{"producer blocked by quota", apulsar.ErrProducerBlockedQuotaExceeded, true},
		{"max concurrent operations", apulsar.ErrMaxConcurrentOpsReached, true},
		{"coordinator not enabled", apulsar.ErrTransactionCoordinatorNotEnabled, false},
		{"add to batch failed", apulsar.ErrFailAddToBatch, false},
		{"metadata too large", apulsar.ErrMetaTooLarge, false},
		// The rules apply in their documented order: the first that matches decides.
		{"rule 2 before 3: canceled and deadline", errors.Join(context.Canceled, context.DeadlineExceeded), false},
		{"rule 2 before 4: canceled and a send timeout", errors.Join(apulsar.ErrSendTimeout, context.Canceled), false},
		{"rule 3 before 4: deadline and a closed producer", errors.Join(apulsar.ErrProducerClosed, context.DeadlineExceeded), true},
		{"rule 4 before 5: a closed producer and a retryable answer", errors.Join(errors.New("server error: ServiceNotReady: x"), apulsar.ErrProducerClosed), false},
		{"rule 4 before 6: a closed producer and eof", errors.Join(io.EOF, apulsar.ErrProducerClosed), false},
		{"rule 5 before 6: a final answer and eof", errors.Join(errors.New("server error: AuthorizationError: x"), io.EOF), false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, retry.IsRetryable(tc.err), tc.name)
	}
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	assert.Zero(t, retry.Backoff{}.Delay(1), "zero backoff means no delay")
	assert.Zero(t, retry.Backoff{Initial: -time.Second, Multiplier: 2}.Delay(3), "a negative Initial means no delay at all")
	// 0 × 10^999 is 0 × +Inf, NaN, as a float: a zero Initial must stop before the growth.
	assert.Zero(t, retry.Backoff{Multiplier: 10}.Delay(1000), "a zero Initial means no delay, however many retries")
	b := retry.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}
	assert.Equal(t, 100*time.Millisecond, b.Delay(0), "retry numbers below 1 count as the first")
	assert.Equal(t, 100*time.Millisecond, b.Delay(1))
	assert.Equal(t, 200*time.Millisecond, b.Delay(2))
	assert.Equal(t, 400*time.Millisecond, b.Delay(3))
	assert.Equal(t, time.Second, b.Delay(5), "capped at Max")
	assert.Equal(t, time.Second, b.Delay(math.MaxInt32), "huge retry numbers stay capped")

	constant := retry.Backoff{Initial: 50 * time.Millisecond}
	assert.Equal(t, 50*time.Millisecond, constant.Delay(7), "multiplier below 1 means constant")
	shrinking := retry.Backoff{Initial: 50 * time.Millisecond, Multiplier: 0.5}
	assert.Equal(t, 50*time.Millisecond, shrinking.Delay(3), "a multiplier between 0 and 1 means 1, not a shrinking delay")

	uncapped := retry.Backoff{Initial: time.Hour, Multiplier: 10}
	assert.Positive(t, uncapped.Delay(1000), "no overflow into negative durations")
	// 2^63 ns is finite as a float but one beyond time.Duration's range.
	beyond := retry.Backoff{Initial: 1 << 62, Multiplier: 2}
	assert.Equal(t, time.Duration(1<<62), beyond.Delay(2), "a finite delay beyond the range is capped at half of it, not wrapped")

	jittered := retry.Backoff{Initial: time.Second, Multiplier: 1, Jitter: 0.5}
	seen := map[time.Duration]bool{}
	for range 200 {
		d := jittered.Delay(1)
		assert.GreaterOrEqual(t, d, 500*time.Millisecond)
		assert.LessOrEqual(t, d, time.Second)
		seen[d] = true
	}
	assert.Greater(t, len(seen), 1, "jitter varies the delay")

	// Delay never goes negative, even for a Jitter that Validate refuses.
	wild := retry.Backoff{Initial: time.Second, Jitter: 3}
	for range 200 {
		assert.GreaterOrEqual(t, wild.Delay(1), time.Duration(0))
	}
}

// TestDefaults: the documented defaults, 3 deliveries, Republish, and a backoff of 1 s
// doubling up to 1 min with 20 % jitter.
func TestDefaults(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 3, retry.DefaultMaxAttempts)
	assert.Equal(t, retry.Backoff{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.2}, retry.DefaultBackoff())
	assert.Equal(t, retry.Policy{MaxAttempts: 3, Strategy: retry.Republish, Backoff: retry.DefaultBackoff()}, retry.DefaultPolicy())
	assert.Equal(t, retry.Republish, retry.Policy{}.Strategy, "the zero Strategy is Republish")
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, retry.DefaultPolicy().Validate())
	require.NoError(t, retry.Policy{}.Validate())
	require.NoError(t, retry.Policy{Backoff: retry.Backoff{Jitter: 1}}.Validate(), "a jitter of 1 is in [0, 1]")
	assert.Equal(t, retry.DefaultMaxAttempts, retry.Policy{}.Attempts())
	assert.Equal(t, 1, retry.Policy{MaxAttempts: 1}.Attempts())

	bad := []retry.Policy{
		{MaxAttempts: -1},
		{Strategy: retry.Strategy(9)},
		{Backoff: retry.Backoff{Max: -time.Second}},
		{Backoff: retry.Backoff{Multiplier: math.NaN()}},
		{Backoff: retry.Backoff{Multiplier: -2}},
		{Backoff: retry.Backoff{Multiplier: math.Inf(1)}},
		{Backoff: retry.Backoff{Jitter: math.NaN()}},
		{Backoff: retry.Backoff{Jitter: 1.5}},
		{Backoff: retry.Backoff{Jitter: -0.1}},
	}
	for _, p := range bad {
		err := p.Validate()
		require.ErrorIs(t, err, retry.ErrInvalidPolicy, "%+v", p)
		assert.Contains(t, err.Error(), "retry: invalid policy")
	}
}

func TestStrategyString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "republish", retry.Republish.String())
	assert.Equal(t, "nack", retry.Nack.String())
	assert.Equal(t, "Strategy(7)", retry.Strategy(7).String())
}

func TestWait(t *testing.T) {
	t.Parallel()
	require.NoError(t, retry.Wait(t.Context(), 0))
	start := time.Now()
	require.NoError(t, retry.Wait(t.Context(), 20*time.Millisecond))
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "a live ctx waits the full delay")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, retry.Wait(ctx, time.Hour), context.Canceled, "an ended ctx stops the wait")
	// With d = 0 an ended ctx must win every time; a zero timer and ctx.Done() both ready
	// in one select would pick either at random.
	for range 64 {
		require.ErrorIs(t, retry.Wait(ctx, 0), context.Canceled, "d = 0 returns ctx.Err() when ctx has ended")
	}
}
