package dlq_test

import (
	"crypto/tls"
	"net/http"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
)

func TestPeekReadsAKeyWithControlCharacters(t *testing.T) {
	eachTarget(t, peekReadsAKeyWithControlCharacters)
}

// peekReadsAKeyWithControlCharacters: the broker's admin API writes an unbatched message's
// key in an HTTP header as ISO-8859-1, with its control characters as they are, which Go's
// HTTP client refuses. Peek reads it, with those characters as spaces (and "€", beyond
// ISO-8859-1, a space already from the broker), and reaches the message behind it; a
// redrive moves the key exactly.
func peekReadsAKeyWithControlCharacters(t *testing.T, f *fixture) {
	t.Helper()
	f.ensure(t)
	const key = "café€\x01\x1b[2J"
	p, err := f.client.CreateProducer(apulsar.ProducerOptions{Topic: f.dlq, DisableBatching: true})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{
		Payload: annotated(urnA, "id-k", envelope.ReasonFailed), Key: key,
		Properties: map[string]string{"bq-job": urnA, "note": "café€\x01"},
	})
	require.NoError(t, err)
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: annotated(urnA, "id-next", envelope.ReasonFailed), Properties: map[string]string{"bq-job": urnA}})
	require.NoError(t, err)

	peeked, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.NoError(t, err)
	require.Len(t, peeked, 2, "the message behind the key is reached")
	assert.Equal(t, "café   [2J", peeked[0].Key, "control characters read as spaces")
	assert.Equal(t, "café \x01", peeked[0].Properties["note"], "a property keeps its control character: JSON escapes it")
	assert.Equal(t, urnA, peeked[0].RoutingURN)
	assert.Equal(t, "id-next", peeked[1].Envelope.Meta.ID)

	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Limit: 1, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	assert.Equal(t, key, rep.Moved[0].Key, "read over the binary protocol: exact")
	stored := f.stored(t, f.queue)
	require.Len(t, stored, 1)
	assert.Equal(t, key, stored[0].Key())
}

// TestPeekOverHTTPSReadsAKeyWithControlCharacters runs against the embedded broker only: it
// needs an admin API over HTTPS with a CA of the test's own. The Admin does TLS itself, under
// the connection that cleans an answer's head, with the caller's TLS settings: a peek reads
// the key, and a client that does not trust the CA is refused.
func TestPeekOverHTTPSReadsAKeyWithControlCharacters(t *testing.T) {
	t.Parallel()
	f, pki := tlsAdminFixture(t)
	writeAnEscapedKey(t, f)
	peekTheEscapedKey(t, f, proxiedAdmin(t, f.b.AdminTLSURL(), pki.trust(), func(*http.Transport) {}))

	_, err := dlq.Peek(t.Context(), proxiedAdmin(t, f.b.AdminTLSURL(), &tls.Config{MinVersion: tls.VersionTLS12}, func(*http.Transport) {}), dlq.PeekOptions{Topic: f.dlq})
	require.ErrorContains(t, err, "certificate", "the caller's trust decides")
}

// writeAnEscapedKey writes two dead letters to f's DLQ: one without a key, then one keyed
// "k\x1bz", which the broker's peek answer carries with its ESC as it is.
func writeAnEscapedKey(t *testing.T, f *fixture) {
	t.Helper()
	f.ensure(t)
	f.write(t, f.dlq, nil, annotated(urnA, "id-k", envelope.ReasonFailed))
	p, err := f.client.CreateProducer(apulsar.ProducerOptions{Topic: f.dlq, DisableBatching: true})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: annotated(urnA, "id-esc", envelope.ReasonFailed), Key: "k\x1bz"})
	require.NoError(t, err)
}

// peekTheEscapedKey peeks what [writeAnEscapedKey] wrote, through a, and finds the key with
// its ESC read as a space.
func peekTheEscapedKey(t *testing.T, f *fixture, a *dlq.Admin) {
	t.Helper()
	peeked, err := dlq.Peek(t.Context(), a, dlq.PeekOptions{Topic: f.dlq})
	require.NoError(t, err)
	require.Len(t, peeked, 2)
	assert.Equal(t, "k z", peeked[1].Key)
}
