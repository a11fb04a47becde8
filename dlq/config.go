package dlq

import "fmt"

// Config is the dead-letter configuration of a consumer. The zero value is the default:
// every queue dead-letters to "<queue>.dlq" in the queue's tenant and namespace
// ([TopicFor]). Dead-lettering is turned off only explicitly, with Disabled (every queue)
// or a [QueueConfig] with Disabled (one queue).
type Config struct {
	// Disabled turns dead-lettering off for every queue: exhausted messages are then
	// acknowledged, logged at WARN and reported to the consumer's error hook. Default: false.
	Disabled bool
	// Topic, when not empty, is the dead-letter topic of every queue that has no entry in
	// Queues. Default: "" (each queue's "<queue>.dlq").
	Topic string
	// Subscription, when not empty, is the retention subscription of every queue's
	// dead-letter topic that has none in Queues: the durable subscription the consumer
	// ensures ([EnsureSubscription]) before its first write to a dead-letter topic, so that
	// the broker keeps the dead letters until they are redriven or purged. Default: ""
	// ([DefaultSubscription], "bq-dlq").
	Subscription string
	// Queues overrides the configuration of single queues, by logical queue name (the last
	// segment of the topic without "-partition-<n>", see [QueueName]). Default: nil.
	Queues map[string]QueueConfig
}

// QueueConfig is the dead-letter configuration of one queue.
type QueueConfig struct {
	// Disabled turns dead-lettering off for this queue. Default: false.
	Disabled bool
	// Topic is this queue's dead-letter topic. Default: "" ([Config.Topic], else "<queue>.dlq").
	Topic string
	// Subscription is the retention subscription of this queue's dead-letter topic.
	// Default: "" ([Config.Subscription], else [DefaultSubscription]).
	Subscription string
}

// Off returns a Config that turns dead-lettering off for every queue.
func Off() Config { return Config{Disabled: true} }

// Validate returns a *[TopicError] for an explicit topic or queue name that cannot be used,
// and a *[SubscriptionError] for a subscription name that cannot be
// ([ValidateSubscriptionName]).
func (c Config) Validate() error {
	if c.Topic != "" {
		if err := ValidateTopic(c.Topic); err != nil {
			return err
		}
	}
	if c.Subscription != "" {
		if err := ValidateSubscriptionName(c.Subscription); err != nil {
			return err
		}
	}
	for name, q := range c.Queues {
		if err := ValidateQueueName(name); err != nil {
			return err
		}
		if q.Topic != "" {
			if err := ValidateTopic(q.Topic); err != nil {
				return fmt.Errorf("dlq: queue %q: %w", name, err)
			}
		}
		if q.Subscription != "" {
			if err := ValidateSubscriptionName(q.Subscription); err != nil {
				return fmt.Errorf("dlq: queue %q: %w", name, err)
			}
		}
	}
	return nil
}

// SubscriptionFor returns the retention subscription of the dead-letter topic of messages
// received on topic: the queue's [QueueConfig.Subscription], else [Config.Subscription],
// else [DefaultSubscription]. It returns a *[TopicError] when topic is malformed. It does
// not say whether dead-lettering is on; [Config.TopicFor] does.
func (c Config) SubscriptionFor(topic string) (string, error) {
	queue, err := QueueName(topic)
	if err != nil {
		return "", err
	}
	if q, ok := c.Queues[queue]; ok && q.Subscription != "" {
		return q.Subscription, nil
	}
	if c.Subscription != "" {
		return c.Subscription, nil
	}
	return DefaultSubscription, nil
}

// TopicFor returns the dead-letter topic of messages received on topic (a partition or a
// whole topic), and false when dead-lettering is off for its queue. It returns a
// *[TopicError] when topic is malformed.
func (c Config) TopicFor(topic string) (string, bool, error) {
	queue, err := QueueName(topic)
	if err != nil {
		return "", false, err
	}
	if c.Disabled {
		return "", false, nil
	}
	if q, ok := c.Queues[queue]; ok {
		if q.Disabled {
			return "", false, nil
		}
		if q.Topic != "" {
			return q.Topic, true, nil
		}
	}
	if c.Topic != "" {
		return c.Topic, true, nil
	}
	dlt, err := TopicFor(topic)
	if err != nil {
		return "", false, err
	}
	return dlt, true, nil
}
