package pulsar

import (
	"context"
	"errors"
	"sync"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// countingSettler counts settlements; recordingSender keeps what was sent and fails on
// demand. Both implement their whole (small) interface.
type countingSettler struct {
	mu         sync.Mutex
	acks, nack int
}

func (s *countingSettler) Ack(apulsar.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acks++
	return nil
}

func (s *countingSettler) Nack(apulsar.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nack++
}

type recordingSender struct {
	fail     bool
	attempts int // sends tried, failed ones included
	sent     []*apulsar.ProducerMessage
}

func (r *recordingSender) Send(_ context.Context, pm *apulsar.ProducerMessage) (apulsar.MessageID, error) {
	r.attempts++
	if r.fail {
		return nil, errors.New("send refused")
	}
	r.sent = append(r.sent, pm)
	return apulsar.EarliestMessageID(), nil
}

// FuzzPipeline: whatever the payload and properties, one delivery is settled exactly once
// (one ack or one nack), never panics, and every copy it writes is well formed: retries
// keep the payload (or its envelope) and carry a valid bq-attempts; dead letters decode.
func FuzzPipeline(f *testing.F) {
	env, err := envelope.Make(testURN, map[string]any{"n": 1})
	require.NoError(f, err)
	good, err := env.Encode()
	require.NoError(f, err)
	f.Add(good, "1", "0", testURN, uint32(0), uint8(0))
	f.Add(good, "2", "", "", uint32(3), uint8(1))
	f.Add([]byte(`{"job":"urn:x"}`), "", "+1", otherURN, uint32(1), uint8(2))
	f.Add([]byte("\xff"), " 1", "99999999999", " ", uint32(7), uint8(3))
	f.Fuzz(func(t *testing.T, payload []byte, schema, attempts, job string, redelivery uint32, mode uint8) {
		settler := &countingSettler{}
		sender := &recordingSender{fail: mode&4 != 0}
		opts := []ConsumerOption{
			WithSubscription("s", apulsar.Shared),
			WithMaxAttempts(int(mode%3) + 1),
			WithRetry(retry.Policy{}),
			Handle(testURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
				if mode&1 != 0 {
					return errors.New("fail")
				}
				if mode&2 != 0 {
					panic("boom")
				}
				return nil
			}),
		}
		cfg, err := consumerSetup(opts)
		require.NoError(t, err)
		c := newConsumer(cfg, nil, settler, func(string) (seam.Sender, func(), error) { return sender, func() {}, nil })
		props := map[string]string{PropSchemaVersion: schema, PropAttempts: attempts, PropJob: job}
		msg := &fakeMessage{topic: testTopic, payload: payload, props: props, redelivery: redelivery}
		c.process(withConsumerInfo(t.Context(), c.eng.info), msg, nil)
		require.NoError(t, c.Close())

		require.Equal(t, 1, settler.acks+settler.nack, "settled exactly once")
		if sender.fail && sender.attempts > 0 {
			// The settlement depended on a write (a retry or a dead letter), which failed.
			require.Zero(t, settler.acks, "a failed write is never followed by an ack")
			require.Equal(t, 1, settler.nack, "a failed write is negatively acknowledged")
		}
		for _, pm := range sender.sent {
			_, ok := parseAttempts(pm.Properties[PropAttempts])
			if pm.Properties[PropSchemaVersion] == schema && GateVerdict(schema, true) != nil {
				require.Equal(t, payload, pm.Payload, "gate rejection: byte for byte")
				continue
			}
			require.True(t, ok, "bq-attempts %q", pm.Properties[PropAttempts])
			if _, derr := envelope.Decode(pm.Payload); derr != nil {
				require.Equal(t, payload, pm.Payload, "an undecodable copy is the payload itself")
			}
		}
	})
}
