package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// Terminal attacks carried by message content.
const (
	osc = "\x1b]0;pwned\x07" // retitles the window
	csi = "\x1b[2J\x1b[H"    // clears the screen
	c1  = "\u009b31m"        // the one-character CSI
	rlo = "\u202e"           // right-to-left override
)

// sendHostile writes an envelope whose URN, queue, properties, key and ordering key carry
// terminal sequences to topic, and a non-JSON payload with raw sequences.
func sendHostile(t *testing.T, url, topic string, deadLetter bool) {
	t.Helper()
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url, Logger: plog.DefaultNopLogger()})
	require.NoError(t, err)
	defer client.Close()
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(t, err)
	defer p.Close()

	env, err := envelope.Make("urn:babel:orders:"+osc, map[string]any{"note": "hi" + c1 + rlo},
		envelope.WithQueue("orders"+csi))
	require.NoError(t, err)
	if deadLetter {
		env = env.ToDeadLetter(envelope.DeadLetterInfo{
			Reason: envelope.ReasonFailed, Cause: errors.New("boom" + osc), Attempts: 3, FailedAt: time.UnixMilli(1),
		})
	}
	payload, err := env.Encode()
	require.NoError(t, err)
	props := bqpulsar.ProjectProperties(env)
	props["x-evil"+csi] = "value" + osc + rlo
	ctx := context.Background()
	_, err = p.Send(ctx, &apulsar.ProducerMessage{
		Payload: payload, Properties: props, Key: "key" + csi, OrderingKey: "ok" + osc,
	})
	require.NoError(t, err)
	_, err = p.Send(ctx, &apulsar.ProducerMessage{Payload: []byte("not json " + csi + "\xff")})
	require.NoError(t, err)
}

// assertNoControl fails when out holds a byte or rune that steers a terminal.
func assertNoControl(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		assert.True(t, safeForTerminal(line), "unescaped control character in %q", line)
	}
}

func TestTailEscapesMessageContent(t *testing.T) {
	b := pulsartest.NewBroker(t)
	sendHostile(t, b.URL(), "orders", false)

	code, stdout, stderr := runBQ(t, "tail", "--url", b.URL(), "--topic", "orders", "--wait", "500ms")
	require.Equal(t, exitOK, code, stderr)
	assertNoControl(t, stdout)
	assert.Contains(t, stdout, `  key: key\x1b[2J\x1b[H`+"\n")
	assert.Contains(t, stdout, `  ordering key: ok\x1b]0;pwned\x07`+"\n")
	assert.Contains(t, stdout, `  x-evil\x1b[2J\x1b[H: value\x1b]0;pwned\x07\u202e`+"\n")
	assert.Contains(t, stdout, `  bq-job: urn:babel:orders:\x1b]0;pwned\x07`+"\n")
	assert.Contains(t, stdout, `verdict: accepted urn:babel:orders:\x1b]0;pwned\x07, attempts 0`)
	assert.Contains(t, stdout, `"note": "hi\u009b31m\u202e"`, "C1 and bidi inside JSON strings are escaped")
	assert.Contains(t, stdout, `"not json \x1b[2J\x1b[H\xff"`)
	assert.True(t, strings.HasSuffix(stdout, "2 message(s)\n"), stdout)

	// --raw prints the payload bytes as they are, and nothing else raw.
	code, stdout, stderr = runBQ(t, "tail", "--url", b.URL(), "--topic", "orders", "--wait", "500ms", "--raw")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "  not json "+csi+"\xff\n")
	assert.Contains(t, stdout, `  key: key\x1b[2J\x1b[H`+"\n")
}

func TestDLQOutputEscapesMessageContent(t *testing.T) {
	env, err := envelope.Make("urn:babel:orders:"+osc, map[string]any{"note": "hi" + c1},
		envelope.WithQueue("orders"+csi))
	require.NoError(t, err)
	env = env.ToDeadLetter(envelope.DeadLetterInfo{
		Reason: envelope.ReasonFailed, Cause: errors.New("boom" + osc), Attempts: 3, FailedAt: time.UnixMilli(1),
	})
	payload, err := env.Encode()
	require.NoError(t, err)
	m := dlq.Message{
		ID: apulsar.EarliestMessageID(), Kind: dlq.KindAnnotated, Envelope: env,
		URN: env.URN(), RoutingURN: "urn:babel:routed:" + rlo, Key: "key" + csi,
		Properties: map[string]string{"x-evil" + csi: "value" + osc}, Payload: payload,
	}

	line := summarize(m) // bq dlq list
	assert.True(t, safeForTerminal(line), line)
	assert.Contains(t, line, `reason=failed urn=urn:babel:routed:\u202e body_urn=urn:babel:orders:\x1b]0;pwned\x07`)
	assert.Contains(t, line, `original_queue=orders\x1b[2J\x1b[H`)
	assert.Contains(t, line, `error="boom\x1b]0;pwned\a"`)

	var out strings.Builder // bq dlq peek
	printBody(&out, body{key: m.Key, props: m.Properties, payload: m.Payload, note: line})
	assertNoControl(t, out.String())
	assert.Contains(t, out.String(), `  x-evil\x1b[2J\x1b[H: value\x1b]0;pwned\x07`+"\n")
	assert.Contains(t, out.String(), `  key: key\x1b[2J\x1b[H`+"\n")
	assert.Contains(t, out.String(), `"original_queue": "orders\u001b[2J\u001b[H"`, "JSON keeps its own escapes")
	assert.Contains(t, out.String(), `"note": "hi\u009b31m"`)
}
