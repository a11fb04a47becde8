package pulsar_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// TestHugePoisonBodiesAreDeadLetteredOnceAsTruncatedCopies: poison bodies whose full
// dead-letter copy would exceed the broker's message size (a 1 MB body of NULs makes a 6 MB
// copy) no longer loop: each is dead-lettered once, as a truncated copy, and the backlog
// drains.
func TestHugePoisonBodiesAreDeadLetteredOnceAsTruncatedCopies(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, client := brokerAndClient(t)
	topic := uniqueTopic(t, "poison")

	bodies := map[string][]byte{
		"nul":     make([]byte, 1_000_000),
		"invalid": bytes.Repeat([]byte{0xff}, 4_000_000),
		"quotes":  bytes.Repeat([]byte{'"'}, 5_000_000),
	}
	var mu sync.Mutex
	var truncations []error
	dead := make(chan struct{}, 10)
	c, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("s", apulsar.Shared),
		bqpulsar.WithNackRedeliveryDelay(100*time.Millisecond),
		bqpulsar.Handle("urn:babel:x", func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }),
		onFailure(func(err error, _ *envelope.Envelope, _ apulsar.Message) {
			if errors.Is(err, bqpulsar.ErrTruncated) {
				mu.Lock()
				truncations = append(truncations, err)
				mu.Unlock()
			}
		}),
		onDeadLettered(func() { dead <- struct{}{} }),
	)
	require.NoError(t, err)
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: 30 * time.Second})
	require.NoError(t, err)
	for name, body := range bodies {
		_, err := p.Send(ctx, &apulsar.ProducerMessage{Payload: body, Key: name})
		require.NoError(t, err, name)
	}
	p.Close()
	runConsumer(t, c)
	for range bodies {
		select {
		case <-dead:
		case <-time.After(waitLong):
			t.Fatal("a poison body was not dead-lettered")
		}
	}
	time.Sleep(300 * time.Millisecond) // a loop would redeliver within the 100 ms nack delay
	assert.Empty(t, dead, "each body dead-lettered exactly once")
	mu.Lock()
	assert.Len(t, truncations, len(bodies))
	mu.Unlock()

	copies := collectAll(t, client, topic+".dlq", len(bodies))
	for _, m := range copies {
		body := bodies[m.Key()]
		require.NotNil(t, body, "key %q", m.Key())
		assert.LessOrEqual(t, len(m.Payload()), 5<<20, "the copy fits the broker")
		var cp struct {
			Truncated      bool   `json:"truncated"`
			OriginalSize   int    `json:"original_size"`
			OriginalSHA256 string `json:"original_sha256"`
			DeadLetter     struct {
				Reason string `json:"reason"`
			} `json:"dead_letter"`
		}
		require.NoError(t, json.Unmarshal(m.Payload(), &cp), m.Key())
		sum := sha256.Sum256(body)
		assert.True(t, cp.Truncated, m.Key())
		assert.Equal(t, len(body), cp.OriginalSize, m.Key())
		assert.Equal(t, hex.EncodeToString(sum[:]), cp.OriginalSHA256, m.Key())
		assert.Equal(t, "poison", cp.DeadLetter.Reason, m.Key())
		assert.Equal(t, "1", m.Properties()[bqpulsar.PropAttempts])
	}
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Stats(topic).Subscriptions["s"].Backlog == 0 }, "the backlog did not drain")
	h := c.Health()
	assert.True(t, h.Ready, "a truncation is not a failure")
	require.NotEmpty(t, h.Warnings, "but health shows it")
	assert.Contains(t, h.Warnings[0], "truncated")
}

// collectAll reads n messages of topic from the start, on its own subscription.
func collectAll(t *testing.T, client apulsar.Client, topic string, n int) []apulsar.Message {
	t.Helper()
	r, err := client.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
	require.NoError(t, err)
	defer r.Close()
	var out []apulsar.Message
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	for len(out) < n {
		m, err := r.Next(ctx)
		require.NoError(t, err, "read %d of %d", len(out), n)
		out = append(out, m)
	}
	return out
}
