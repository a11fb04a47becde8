package pulsar

import (
	"time"

	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// transientFor bounds how long [NewConsumer] and [NewPublisher] go on asking a broker that
// answers "not now": 30 s, pulsar-client-go's default operation timeout.
const transientFor = 30 * time.Second

// Pauses between those attempts: from transientPauseMin, doubling, at most transientPauseMax.
const (
	transientPauseMin = 100 * time.Millisecond
	transientPauseMax = time.Second
)

// whileTransient calls create until it succeeds, fails for another reason than a broker's
// temporary refusal, or transientFor has passed, and returns its last result.
// pulsar-client-go v0.21.0, as v0.19.0 before it, tries a Subscribe or CreateProducer once
// (the first grabConn of newPartitionConsumer, the first grabCnx of newPartitionProducer):
// while the topic is being unloaded or moved to another broker (a topic unload, a broker's
// restart, a rebalance) the broker answers ServiceNotReady, "Topic is temporarily
// unavailable", and the call fails although the same call succeeds a moment later. A
// consumer or producer that exists already reconnects by itself through the same window;
// this gives a new one the same patience. A connection that cannot be made is not retried
// here: the client has already waited its operation timeout for it.
func whileTransient[T any](logger *zap.Logger, what string, create func() (T, error)) (T, error) {
	deadline := time.Now().Add(transientFor)
	pause := transientPauseMin
	for {
		v, err := create()
		if err == nil || !transientAnswer(err) || time.Now().Add(pause).After(deadline) {
			return v, err
		}
		logger.Warn("the broker refused for now; trying again", zap.String("op", what), zap.Error(err),
			zap.Duration("pause", pause))
		pauseFor(pause) // NewConsumer and NewPublisher take no context: transientFor bounds the waits
		pause = min(2*pause, transientPauseMax)
	}
}

// pauseFor waits d, for a caller that has no context to end the wait early.
func pauseFor(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// transientAnswer reports whether err is the broker's answer that it cannot serve the request
// now (retry.IsRetryable's rule for a broker's error answer), not a connection failure.
func transientAnswer(err error) bool {
	return retry.IsRetryable(err) && !isConnectionLevel(err)
}
