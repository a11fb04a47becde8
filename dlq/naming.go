package dlq

import (
	"errors"
	"fmt"
	"strings"
)

// Suffix is appended to a logical queue name to name its dead-letter topic.
const Suffix = ".dlq"

// ErrInvalidTopic is returned by the naming functions ([QueueName], [ParentTopic],
// [TopicFor], [Config.TopicFor], [Config.Validate]) for a topic or queue name they cannot
// use.
var ErrInvalidTopic = errors.New("dlq: invalid topic")

// TopicError says which topic or queue name was refused and why. It matches
// [ErrInvalidTopic] with errors.Is.
type TopicError struct {
	// Name is the refused topic or queue name, as given.
	Name string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *TopicError) Error() string {
	return fmt.Sprintf("dlq: invalid topic %q: %s", e.Name, e.Reason)
}

// Is reports whether target is [ErrInvalidTopic].
func (*TopicError) Is(target error) bool { return target == ErrInvalidTopic }

// topicName is a Pulsar topic split into its parts. prefix is everything up to and
// including the last '/' ("" for a short name such as "orders"), local the last segment.
type topicName struct {
	prefix string
	local  string
}

// parseTopic splits and validates a topic name in one of the forms pulsar-client-go
// accepts: "name", "tenant/namespace/name", or either of them behind "persistent://" or
// "non-persistent://".
func parseTopic(topic string) (topicName, error) {
	rest := topic
	if i := strings.Index(rest, "://"); i >= 0 {
		domain := rest[:i]
		if domain != "persistent" && domain != "non-persistent" {
			return topicName{}, &TopicError{Name: topic, Reason: "the domain must be persistent:// or non-persistent://"}
		}
		rest = rest[i+3:]
		if strings.Count(rest, "/") != 2 {
			return topicName{}, &TopicError{Name: topic, Reason: "a fully qualified topic is domain://tenant/namespace/name"}
		}
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 1 && len(parts) != 3 {
		return topicName{}, &TopicError{Name: topic, Reason: "a topic is name or tenant/namespace/name"}
	}
	for _, p := range parts {
		if p == "" {
			return topicName{}, &TopicError{Name: topic, Reason: "empty path segment"}
		}
	}
	local := parts[len(parts)-1]
	return topicName{prefix: topic[:len(topic)-len(local)], local: local}, nil
}

// stripPartition removes a "-partition-<n>" suffix (n decimal digits) from a local name.
func stripPartition(local string) string {
	i := strings.LastIndex(local, "-partition-")
	if i < 0 {
		return local
	}
	digits := local[i+len("-partition-"):]
	if digits == "" {
		return local
	}
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' {
			return local
		}
	}
	return local[:i]
}

// QueueName returns the logical BabelQueue queue name of a topic: its last '/'-separated
// segment with any "-partition-<n>" suffix removed, so that
// "persistent://public/default/orders-partition-3" is "orders". It returns a *[TopicError]
// for a malformed topic or when nothing is left of the name.
func QueueName(topic string) (string, error) {
	t, err := parseTopic(topic)
	if err != nil {
		return "", err
	}
	q := stripPartition(t.local)
	if q == "" {
		return "", &TopicError{Name: topic, Reason: "the queue name is empty"}
	}
	return q, nil
}

// ParentTopic returns topic without its "-partition-<n>" suffix, in the same form it was
// given: retries and dead letters of a message received on a partition go to the parent
// topic, never to a single partition. It returns a *[TopicError] for a malformed topic.
func ParentTopic(topic string) (string, error) {
	t, err := parseTopic(topic)
	if err != nil {
		return "", err
	}
	q := stripPartition(t.local)
	if q == "" {
		return "", &TopicError{Name: topic, Reason: "the queue name is empty"}
	}
	return t.prefix + q, nil
}

// TopicFor returns the default dead-letter topic of the queue topic belongs to:
// "<queue>.dlq" in the same tenant and namespace (and the same form: a short name gives a
// short name). "persistent://t/n/orders-partition-2" gives "persistent://t/n/orders.dlq".
func TopicFor(topic string) (string, error) {
	t, err := parseTopic(topic)
	if err != nil {
		return "", err
	}
	q := stripPartition(t.local)
	if q == "" {
		return "", &TopicError{Name: topic, Reason: "the queue name is empty"}
	}
	return t.prefix + q + Suffix, nil
}

// ValidateQueueName returns a *[TopicError] when name cannot be a logical queue name: empty,
// containing '/', or ending in a partition suffix.
func ValidateQueueName(name string) error {
	switch {
	case name == "":
		return &TopicError{Name: name, Reason: "the queue name is empty"}
	case strings.Contains(name, "/"):
		return &TopicError{Name: name, Reason: "a queue name has no '/'; give the last segment of the topic"}
	case stripPartition(name) != name:
		return &TopicError{Name: name, Reason: "a queue name has no -partition-<n> suffix"}
	}
	return nil
}

// ValidateTopic returns a *[TopicError] when topic is not a topic name pulsar-client-go
// accepts.
func ValidateTopic(topic string) error {
	_, err := parseTopic(topic)
	return err
}
