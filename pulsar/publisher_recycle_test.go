package pulsar_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The Publisher reuses a message's payload buffer and property map once the client has
// called back. Every message received must still carry its own payload and properties: a
// reuse before the client was done would show here as a message with another one's header,
// body or ids (and as a data race under -race).
func TestPublisherReusedMessagesStayDistinct(t *testing.T) {
	broker := pulsartest.NewBroker(t)
	client := newClient(t, broker)
	for _, tc := range []struct {
		name  string
		opts  []bqpulsar.PublisherOption
		async bool
	}{
		{name: "async batched per key", async: true},
		{name: "async unbatched", async: true, opts: []bqpulsar.PublisherOption{
			bqpulsar.WithProducerOptions(func(o *apulsar.ProducerOptions) { o.DisableBatching = true }),
		}},
		{name: "sync batched per key"},
		{name: "sync unbatched", opts: []bqpulsar.PublisherOption{
			bqpulsar.WithProducerOptions(func(o *apulsar.ProducerOptions) { o.DisableBatching = true }),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "persistent://public/default/recycle-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			col := collect(t, client, topic)
			pub, err := bqpulsar.NewPublisher(client, topic, tc.opts...)
			require.NoError(t, err)
			const n = 300
			ctx := context.Background()
			var wg sync.WaitGroup
			for i := range n {
				data := map[string]any{"n": i}
				opts := []bqpulsar.PublishOption{
					bqpulsar.WithHeaders(map[string]string{"n": strconv.Itoa(i)}),
					bqpulsar.WithKey("k" + strconv.Itoa(i%7)),
				}
				if i%5 == 0 {
					opts = append(opts, bqpulsar.WithDelay(time.Millisecond)) // bq-delay on some only
				}
				if tc.async {
					wg.Add(1)
					require.NoError(t, pub.PublishAsync(ctx, "urn:babel:it:n", data, func(_ string, err error) {
						assert.NoError(t, err)
						wg.Done()
					}, opts...))
					continue
				}
				_, err := pub.Publish(ctx, "urn:babel:it:n", data, opts...)
				require.NoError(t, err)
			}
			wg.Wait()
			require.NoError(t, pub.Close())

			seen := map[int]bool{}
			for _, m := range col.wait(t, n, 30*time.Second) {
				env, err := envelope.Decode(m.Payload())
				require.NoError(t, err)
				var d struct {
					N int `json:"n"`
				}
				require.NoError(t, json.Unmarshal(env.Data, &d))
				props := m.Properties()
				assert.Equal(t, strconv.Itoa(d.N), props["n"], "the header is the one published with this body")
				assert.Equal(t, env.Meta.ID, props[bqpulsar.PropMessageID])
				assert.Equal(t, env.TraceID, props[bqpulsar.PropTraceID])
				assert.Equal(t, "k"+strconv.Itoa(d.N%7), m.Key())
				_, delayed := props[bqpulsar.PropDelay]
				assert.Equal(t, d.N%5 == 0, delayed, "bq-delay only where WithDelay was given (message %d)", d.N)
				assert.False(t, seen[d.N], "message %d received twice", d.N)
				seen[d.N] = true
			}
			assert.Len(t, seen, n)
		})
	}
}
