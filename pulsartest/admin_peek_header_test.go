package pulsartest_test

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// TestPeekWritesHeadersAsJettyDoes: a peeked message's key and properties are header values
// in ISO-8859-1, as Apache Pulsar's web server writes them: "é" is the byte 0xE9, "€"
// (beyond ISO-8859-1) and CR and LF are spaces, and other control characters go as they are.
// Read on the wire: Go's HTTP client refuses such a header.
func TestPeekWritesHeadersAsJettyDoes(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	client := newClient(t, b.URL())
	const topic = "persistent://public/default/peek-headers"
	c, err := client.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	require.NoError(t, err)
	c.Close()
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{
		Payload: []byte("x"), Key: "café€\x01\r\nX: 1", Properties: map[string]string{"note": "é€\x01"},
	})
	require.NoError(t, err)

	u, err := url.Parse(b.AdminURL())
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /admin/v2/persistent/public/default/peek-headers/subscription/s/position/1 HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", u.Host)
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	head := map[string]string{}
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		line = strings.TrimSuffix(line, "\r\n")
		if line == "" {
			break
		}
		if k, v, ok := strings.Cut(line, ": "); ok {
			head[strings.ToLower(k)] = v
		}
	}
	assert.Equal(t, "caf\xe9 \x01  X: 1", head["x-pulsar-partition-key"])
	// The bytes on the wire are the point (0xE9 is not UTF-8), not the JSON value.
	assert.Equal(t, []byte(`{"note":"`+"\xe9"+` \u0001"}`), []byte(head["x-pulsar-property"])) //nolint:testifylint // bytes, not JSON values
}
