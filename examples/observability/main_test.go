package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

type spanID struct {
	TraceID string `json:"TraceID"`
	SpanID  string `json:"SpanID"`
}

// span is what the test reads of the stdout exporter's JSON.
type span struct {
	Name        string `json:"Name"`
	SpanContext spanID `json:"SpanContext"`
	Parent      spanID `json:"Parent"`
	Events      []struct {
		Name string `json:"Name"`
	} `json:"Events"`
}

func TestObservability(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, options{}))
	s := out.String()
	assert.Contains(t, s, "broker: embedded Pulsar-protocol broker at pulsar://127.0.0.1:")
	assert.Contains(t, s, "published 3 orders to persistent://public/default/observability-orders\n")
	assert.Contains(t, s, "GET /health/ready: 200 OK\n")
	assert.True(t, strings.HasSuffix(s, "done\n"), s)

	var spans []span
	for line := range strings.Lines(s) {
		if js, ok := strings.CutPrefix(line, "span: "); ok {
			var sp span
			require.NoError(t, json.Unmarshal([]byte(js), &sp), js)
			spans = append(spans, sp)
		}
	}
	byName := map[string][]span{}
	for _, sp := range spans {
		byName[sp.Name] = append(byName[sp.Name], sp)
	}
	const dest = "persistent://public/default/observability-orders"
	require.Len(t, byName["checkout"], 1)
	require.Len(t, byName["send "+dest], 4, "three orders, and the consumer's retry republish")
	require.Len(t, byName["process "+dest], 4, "three orders, one retried")
	require.Len(t, byName["reserve stock"], 4)
	checkout := byName["checkout"][0]
	sends := map[string]bool{}
	republishedBy := map[string]bool{} // the consumer spans that republished
	for _, p := range byName["send "+dest] {
		sends[p.SpanContext.SpanID] = true
		if p.Parent.SpanID != checkout.SpanContext.SpanID {
			republishedBy[p.Parent.SpanID] = true
		}
	}
	assert.Len(t, republishedBy, 1, "three producer spans are the checkout's children, the retry's a consumer span's")
	dead := byName["send "+dest+".dlq"]
	require.Len(t, dead, 1, "order 3's dead-letter copy")
	processes := map[string]bool{}
	retries := 0
	for _, c := range byName["process "+dest] {
		assert.Equal(t, checkout.SpanContext.TraceID, c.SpanContext.TraceID)
		assert.True(t, sends[c.Parent.SpanID], "a consumer span is a producer span's child")
		processes[c.SpanContext.SpanID] = true
		for _, e := range c.Events {
			if e.Name == "babelqueue.retry" {
				retries++
				assert.True(t, republishedBy[c.SpanContext.SpanID], "the retried delivery's span is the republish's parent")
			}
		}
	}
	assert.Equal(t, 1, retries)
	assert.True(t, processes[dead[0].Parent.SpanID], "the dead-letter copy's span is a consumer span's child")
	for _, h := range byName["reserve stock"] {
		assert.True(t, processes[h.Parent.SpanID], "the handler's span is a consumer span's child")
	}

	// The scrape: BabelQueue's metrics and the client's, from one registry.
	assert.Contains(t, s, "GET /metrics: 200 OK")
	for _, want := range []string{
		`messaging_client_consumed_messages_total{`,
		`babelqueue_consumer_handled_total{`,
		`babelqueue_consumer_failed_total{`,
		`babelqueue_consumer_retried_total{`,
		`babelqueue_consumer_dead_lettered_total{babelqueue_dead_letter_reason="failed"`,
		`babelqueue_consumer_settled_total{babelqueue_outcome="acked"`,
		`messaging_process_duration_seconds_count{`,
		`babelqueue_consumer_in_flight{`,
		`pulsar_client_messages_published{`,
	} {
		assert.Contains(t, s, want)
	}
	// The publishes and the retry republish to the topic, the copy to its dead-letter topic,
	// with the URN (WithURNMetricAttribute) and the broker's address (WithServiceURL).
	sent := map[string]string{}
	for line := range strings.Lines(s) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "messaging_client_sent_messages_total{"); ok {
			labels, value, _ := strings.Cut(rest, "} ")
			assert.Contains(t, labels, `babelqueue_urn="urn:babel:orders:created"`)
			assert.Contains(t, labels, `server_address="127.0.0.1"`)
			assert.Contains(t, labels, `babelqueue_outcome="ok"`)
			for _, d := range []string{dest, dest + ".dlq"} {
				if strings.Contains(labels, `messaging_destination_name="`+d+`"`) {
					sent[d] = value
				}
			}
		}
	}
	assert.Equal(t, map[string]string{dest: "4", dest + ".dlq": "1"}, sent)
}
