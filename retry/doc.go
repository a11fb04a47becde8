// Package retry holds the retry vocabulary of the BabelQueue Pulsar SDK: the [Policy] a
// consumer applies to failed deliveries (how many deliveries in total, whether a retry is a
// republish or a negative acknowledgement, and the [Backoff] between deliveries), the error
// classifier [IsRetryable] for errors coming out of pulsar-client-go, and [Wait], the
// cancellable timer the SDK waits on instead of sleeping.
//
// # Policy
//
//	policy := retry.Policy{
//		MaxAttempts: 5,                // deliveries in total, the first included
//		Strategy:    retry.Republish,  // default; works on every subscription type
//		Backoff:     retry.Backoff{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.2},
//	}
//
// MaxAttempts counts deliveries, the first one included (ADR-0036 of the BabelQueue
// contract): 1 means no retry, 3 (the default) means the first delivery plus two retries.
//
// # Strategies
//
// [Republish] sends a copy of the message with its attempts raised to the same (parent)
// topic and acknowledges the original only after that send succeeded. It works on every
// subscription type. [Nack] negatively acknowledges the message and lets the broker
// redeliver it; the broker raises the redelivery count only on Shared and Key_Shared
// subscriptions, so the consumer refuses Nack on Exclusive and Failover, where it would
// loop forever.
//
// # Classifying errors
//
// [IsRetryable] documents every rule it applies, so callers never guess which errors of
// pulsar-client-go are transient.
package retry
