package pulsar

import (
	"context"
	"fmt"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// retentionFor returns the [engineConfig].Retention of a front on client: the queue's retention
// subscription ([dlq.Config.SubscriptionFor]) is made to exist on the dead-letter topic with
// [dlq.EnsureSubscription], which never consumes anything.
func retentionFor(client apulsar.Client, cfg dlq.Config) func(ctx context.Context, topic, deadLetterTopic string) error {
	return func(ctx context.Context, topic, deadLetterTopic string) error {
		sub, err := cfg.SubscriptionFor(topic)
		if err != nil {
			return err
		}
		if err := dlq.EnsureSubscription(ctx, client, deadLetterTopic, sub); err != nil {
			return fmt.Errorf("pulsar: the dead letter is not written, since the broker would not keep it: %w", err)
		}
		return nil
	}
}

// checkRetryStrategy refuses retries by negative ack on a subscription type where the broker
// does not count redeliveries (Exclusive, Failover), so the message would loop forever.
func checkRetryStrategy(s retry.Strategy, t apulsar.SubscriptionType) error {
	if s == retry.Nack && t != apulsar.Shared && t != apulsar.KeyShared {
		return fmt.Errorf("%w: retry by nack needs a Shared or Key_Shared subscription (the broker does not count redeliveries on %s, so the message would loop); use retry.Republish",
			ErrInvalidOption, subTypeName(t))
	}
	return nil
}

// subTypeName names a subscription type as Pulsar does.
func subTypeName(t apulsar.SubscriptionType) string {
	switch t {
	case apulsar.Exclusive:
		return "Exclusive"
	case apulsar.Shared:
		return "Shared"
	case apulsar.Failover:
		return "Failover"
	case apulsar.KeyShared:
		return "Key_Shared"
	default:
		return fmt.Sprintf("type %d", t)
	}
}

// producerSenders returns the producer factory of the settlement writes (retries and dead
// letters) on client; adjust, when set, changes the producer options before the topic is
// set.
func producerSenders(client apulsar.Client, adjust func(*apulsar.ProducerOptions)) func(topic string) (seam.Sender, func(), error) {
	return func(topic string) (seam.Sender, func(), error) {
		po := apulsar.ProducerOptions{
			// Each retry or dead letter is sent synchronously by the worker that holds the
			// message, and a synchronous Send flushes its batch at once, so no write waits
			// for the batching delay; a batch of one message says so outright. Batching is
			// not disabled: pulsar-client-go v0.21.0's unbatched send path (unchanged since
			// v0.19.0) races with its own reconnect (producerName and encryptor are
			// rewritten by grabCnx while internalSingleSend reads them), which -race
			// reports whenever a connection drops during a send.
			BatchingMaxMessages: 1,
		}
		if adjust != nil {
			adjust(&po)
		}
		po.Topic = topic
		p, err := client.CreateProducer(po)
		if err != nil {
			return nil, nil, fmt.Errorf("pulsar: create producer for %q: %w", topic, err)
		}
		return p, p.Close, nil
	}
}
