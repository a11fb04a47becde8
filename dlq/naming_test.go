package dlq_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
)

func TestQueueNameParentAndTopic(t *testing.T) {
	t.Parallel()
	cases := []struct{ topic, queue, parent, dlt string }{
		{"orders", "orders", "orders", "orders.dlq"},
		{"orders-partition-3", "orders", "orders", "orders.dlq"},
		{"public/default/orders", "orders", "public/default/orders", "public/default/orders.dlq"},
		{"persistent://public/default/orders-partition-3", "orders", "persistent://public/default/orders", "persistent://public/default/orders.dlq"},
		{"persistent://acme/billing/invoices", "invoices", "persistent://acme/billing/invoices", "persistent://acme/billing/invoices.dlq"},
		{"non-persistent://t/n/x-partition-10", "x", "non-persistent://t/n/x", "non-persistent://t/n/x.dlq"},
		{"orders-partition-9", "orders", "orders", "orders.dlq"},
		{"orders-partition-", "orders-partition-", "orders-partition-", "orders-partition-.dlq"},
		{"orders-partition-x", "orders-partition-x", "orders-partition-x", "orders-partition-x.dlq"},
		{"a-partition-1-partition-2", "a-partition-1", "a-partition-1", "a-partition-1.dlq"},
	}
	for _, tc := range cases {
		q, err := dlq.QueueName(tc.topic)
		require.NoError(t, err, tc.topic)
		assert.Equal(t, tc.queue, q, tc.topic)
		p, err := dlq.ParentTopic(tc.topic)
		require.NoError(t, err, tc.topic)
		assert.Equal(t, tc.parent, p, tc.topic)
		d, err := dlq.TopicFor(tc.topic)
		require.NoError(t, err, tc.topic)
		assert.Equal(t, tc.dlt, d, tc.topic)
	}
}

func TestNamingRefusesMalformedTopics(t *testing.T) {
	t.Parallel()
	for _, topic := range []string{
		"", "a/b", "a/b/c/d", "persistent://a/b", "persistent://a/b/c/d", "http://a/b/c",
		"persistent://a//c", "a//c", "persistent://a/b/", "-partition-3", "persistent://t/n/-partition-0",
	} {
		_, err := dlq.QueueName(topic)
		require.ErrorIs(t, err, dlq.ErrInvalidTopic, "%q", topic)
		var te *dlq.TopicError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, topic, te.Name)
		assert.Contains(t, err.Error(), "dlq: invalid topic")
		_, err = dlq.ParentTopic(topic)
		require.ErrorIs(t, err, dlq.ErrInvalidTopic, "%q", topic)
		_, err = dlq.TopicFor(topic)
		require.ErrorIs(t, err, dlq.ErrInvalidTopic, "%q", topic)
	}
}

func TestValidateQueueName(t *testing.T) {
	t.Parallel()
	require.NoError(t, dlq.ValidateQueueName("orders"))
	require.NoError(t, dlq.ValidateQueueName("orders.v2"))
	for _, name := range []string{"", "public/default/orders", "orders-partition-1"} {
		require.ErrorIs(t, dlq.ValidateQueueName(name), dlq.ErrInvalidTopic, "%q", name)
	}
}

// TestValidateSubscriptionNameLength: a name of 256 bytes is accepted and one of 257 refused,
// with the bound named; bytes, not characters, are counted. Every name here passes the other
// rules, so only the length can refuse it.
func TestValidateSubscriptionNameLength(t *testing.T) {
	t.Parallel()
	for _, name := range []string{strings.Repeat("a", 256), strings.Repeat("é", 128)} {
		require.NoError(t, dlq.ValidateSubscriptionName(name), "%d bytes, %d characters", len(name), utf8.RuneCountInString(name))
	}
	for _, name := range []string{strings.Repeat("a", 257), strings.Repeat("é", 128) + "a"} {
		err := dlq.ValidateSubscriptionName(name)
		require.ErrorIs(t, err, dlq.ErrInvalidSubscriptionName, "%d bytes", len(name))
		var se *dlq.SubscriptionError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, "the name is longer than 256 bytes", se.Reason)
		assert.Equal(t, name, se.Subscription)
	}
}

func TestConfigTopicFor(t *testing.T) {
	t.Parallel()
	cfg := dlq.Config{
		Queues: map[string]dlq.QueueConfig{
			"payments": {Topic: "persistent://acme/ops/payments-dead"},
			"metrics":  {Disabled: true},
		},
	}
	require.NoError(t, cfg.Validate())

	got, on, err := cfg.TopicFor("persistent://public/default/orders-partition-1")
	require.NoError(t, err)
	assert.True(t, on)
	assert.Equal(t, "persistent://public/default/orders.dlq", got, "default: <queue>.dlq in the same namespace")

	got, on, err = cfg.TopicFor("persistent://public/default/payments")
	require.NoError(t, err)
	assert.True(t, on)
	assert.Equal(t, "persistent://acme/ops/payments-dead", got, "per-queue topic")

	_, on, err = cfg.TopicFor("persistent://public/default/metrics-partition-0")
	require.NoError(t, err)
	assert.False(t, on, "per-queue off")

	shared := dlq.Config{Topic: "all-dead"}
	got, on, err = shared.TopicFor("orders")
	require.NoError(t, err)
	assert.True(t, on)
	assert.Equal(t, "all-dead", got)

	_, on, err = dlq.Off().TopicFor("orders")
	require.NoError(t, err)
	assert.False(t, on)

	_, _, err = cfg.TopicFor("a/b")
	require.ErrorIs(t, err, dlq.ErrInvalidTopic)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, dlq.Config{}.Validate())
	require.ErrorIs(t, dlq.Config{Topic: "a/b"}.Validate(), dlq.ErrInvalidTopic)
	require.ErrorIs(t, dlq.Config{Queues: map[string]dlq.QueueConfig{"a/b": {}}}.Validate(), dlq.ErrInvalidTopic)
	err := dlq.Config{Queues: map[string]dlq.QueueConfig{"orders": {Topic: "x/y"}}}.Validate()
	require.ErrorIs(t, err, dlq.ErrInvalidTopic)
	assert.Contains(t, err.Error(), `dlq: queue "orders"`)
}
