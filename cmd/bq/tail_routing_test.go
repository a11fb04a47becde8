package main

import (
	"context"
	"strings"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The verdict names the URN a consumer routes the message to when its bq-job property is
// usable and names another URN than the body's, and says nothing more otherwise.
func TestTailVerdictNamesTheRoutedURN(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: b.URL(), Logger: plog.DefaultNopLogger()})
	require.NoError(t, err)
	defer client.Close()
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: "orders", DisableBatching: true})
	require.NoError(t, err)
	defer p.Close()
	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"order_id": 1})
	require.NoError(t, err)
	payload, err := env.Encode()
	require.NoError(t, err)
	for _, job := range []string{"urn:babel:orders:created", "urn:babel:orders:legacy-created", " \t", ""} {
		props := bqpulsar.ProjectProperties(env)
		if job == "" {
			delete(props, bqpulsar.PropJob)
		} else {
			props[bqpulsar.PropJob] = job
		}
		_, err := p.Send(context.Background(), &apulsar.ProducerMessage{Payload: payload, Properties: props})
		require.NoError(t, err)
	}

	code, stdout, stderr := runBQ(t, "tail", "--url", b.URL(), "--topic", "orders", "--wait", "500ms")
	require.Equal(t, exitOK, code, stderr)
	var verdicts []string
	for _, line := range strings.Split(stdout, "\n") {
		if v, ok := strings.CutPrefix(line, "  verdict: "); ok {
			verdicts = append(verdicts, v)
		}
	}
	assert.Equal(t, []string{
		"accepted urn:babel:orders:created, attempts 0",
		"accepted urn:babel:orders:created, attempts 0, routed to urn:babel:orders:legacy-created by its bq-job property",
		"accepted urn:babel:orders:created, attempts 0",
		"accepted urn:babel:orders:created, attempts 0",
	}, verdicts, stdout)
}
