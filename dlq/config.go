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
}

// Off returns a Config that turns dead-lettering off for every queue.
func Off() Config { return Config{Disabled: true} }

// Validate returns a *[TopicError] for an explicit topic or queue name that cannot be used.
func (c Config) Validate() error {
	if c.Topic != "" {
		if err := ValidateTopic(c.Topic); err != nil {
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
	}
	return nil
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
