package connector_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)

func TestTraceparent(t *testing.T) {
	tp := connector.Traceparent("4BF92F35-77B3-4DA6-A3CE-929D0E0E4736")
	m := traceparentRE.FindStringSubmatch(tp)
	require.NotNil(t, m, "got %q", tp)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", m[1])
	require.NotEqual(t, "0000000000000000", m[2])
	require.NotEqual(t, tp, connector.Traceparent("4bf92f35-77b3-4da6-a3ce-929d0e0e4736"), "a fresh parent-id each time")
	for _, id := range []string{"", "trace-1", "00000000-0000-0000-0000-000000000000", "4bf92f3577b34da6"} {
		require.Empty(t, connector.Traceparent(id), "%q is no usable trace id", id)
	}
}

// sinkMessages sends msgs through a connector sink with the given attributes and returns
// what the broker stored, in order.
func sinkMessages(t *testing.T, client apulsar.Client, attrs map[string]string, msgs ...messaging.Message[[]byte]) []apulsar.Message {
	t.Helper()
	topic := uniqueTopic(t, "trace")
	col := collect(t, client, topic)
	conn := newConnector(t, connector.WithClient(client))
	attrs["topic"] = topic
	attrs["batchingEnabled"] = "false"
	sink, err := conn.NewSink(t.Context(), messaging.NewChannelConfig("out", connector.Name, messaging.Outgoing, attrs, conn.Attributes()))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sink.Close(ctx)
		_ = conn.Close(ctx)
	})
	reactive.FromSlice(msgs...).Subscribe(sink)
	return col.wait(t, len(msgs))
}

func TestSink_Tracing(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	const traceID = "4bf92f35-77b3-4da6-a3ce-929d0e0e4736"
	env, err := envelope.Make("urn:babel:a:b", map[string]any{"x": 1}, envelope.WithTraceID(traceID))
	require.NoError(t, err)
	payload, err := env.Encode()
	require.NoError(t, err)
	const given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	msgs := func() []messaging.Message[[]byte] {
		return []messaging.Message[[]byte]{
			messaging.NewMessage(payload), // derived from the envelope's trace_id
			messaging.WithMetadataItems(messaging.NewMessage(payload), connector.OutgoingMetadata{
				Properties: map[string]string{connector.PropTraceparent: given},
			}), // kept
			messaging.NewMessage([]byte("raw")), // no trace id: nothing
			messaging.WithMetadataItems(messaging.NewMessage([]byte("raw")), connector.OutgoingMetadata{
				Properties: map[string]string{bqpulsar.PropTraceID: "not-a-uuid"},
			}), // not a UUID: nothing
		}
	}

	t.Run("enabled by default", func(t *testing.T) {
		got := sinkMessages(t, client, map[string]string{"codec": connector.CodecBabelQueue}, msgs()...)
		m := traceparentRE.FindStringSubmatch(got[0].Properties()[connector.PropTraceparent])
		require.NotNil(t, m, "derived traceparent, got %v", got[0].Properties())
		require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", m[1], "trace-id is the UUID's hex digits")
		require.Equal(t, traceID, got[0].Properties()[bqpulsar.PropTraceID])
		require.Equal(t, given, got[1].Properties()[connector.PropTraceparent], "an existing traceparent is kept")
		require.NotContains(t, got[2].Properties(), connector.PropTraceparent)
		require.NotContains(t, got[3].Properties(), connector.PropTraceparent)
	})
	t.Run("disabled", func(t *testing.T) {
		got := sinkMessages(t, client, map[string]string{"codec": connector.CodecBabelQueue, "tracing-enabled": "false"}, msgs()...)
		require.NotContains(t, got[0].Properties(), connector.PropTraceparent, "no traceparent written")
		require.Equal(t, traceID, got[0].Properties()[bqpulsar.PropTraceID], "the contract's bq-trace-id stays")
		require.Equal(t, given, got[1].Properties()[connector.PropTraceparent], "the application's own property passes unchanged")
		require.Empty(t, got[2].Properties(), "nothing extra on a raw payload")
	})
}
