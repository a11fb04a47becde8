package connector

import (
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"
)

// recordingCumulative records AckCumulative and Nack calls.
type recordingCumulative struct {
	acks  []string
	nacks []string
}

func (r *recordingCumulative) AckCumulative(msg apulsar.Message) error {
	r.acks = append(r.acks, string(msg.Payload()))
	return nil
}

func (r *recordingCumulative) Nack(msg apulsar.Message) {
	r.nacks = append(r.nacks, string(msg.Payload()))
}

// idMessage answers the three calls the cumulative settler makes; any other call panics on
// the nil embedded interface, which would show the settler doing more than it should.
type idMessage struct {
	apulsar.Message
	topic   string
	payload []byte
	id      apulsar.MessageID
}

func (m idMessage) ID() apulsar.MessageID { return m.id }
func (m idMessage) Topic() string         { return m.topic }
func (m idMessage) Payload() []byte       { return m.payload }

func cumMsg(topic string, entry int64) apulsar.Message {
	return idMessage{topic: topic, payload: []byte(topic + "/" + string(rune('0'+entry))), id: apulsar.NewMessageID(1, entry, -1, 0)}
}

func TestCumulativeSettler(t *testing.T) {
	t.Run("per partition", func(t *testing.T) {
		r := &recordingCumulative{}
		c := newCumulativeSettler(r)
		a1, b1 := cumMsg("a", 1), cumMsg("b", 1)
		c.track(a1)
		c.track(b1)
		require.NoError(t, c.Ack(b1))
		require.Equal(t, []string{"b/1"}, r.acks, "a pending a/1 does not hold back another partition")
	})
	t.Run("a hole is taken over by the redelivered copy", func(t *testing.T) {
		r := &recordingCumulative{}
		c := newCumulativeSettler(r)
		m1, m2, m3 := cumMsg("t", 1), cumMsg("t", 2), cumMsg("t", 3)
		c.track(m1)
		c.track(m2)
		c.track(m3)
		c.Nack(m2)
		require.NoError(t, c.Ack(m1))
		require.NoError(t, c.Ack(m3))
		require.Equal(t, []string{"t/1"}, r.acks, "3 is not acknowledged over the nacked 2")
		require.Equal(t, []string{"t/2"}, r.nacks)
		again := cumMsg("t", 2)
		c.track(again) // the rewind
		c.track(cumMsg("t", 3))
		require.NoError(t, c.Ack(again))
		require.Equal(t, []string{"t/1", "t/3"}, r.acks)
	})
	t.Run("a covered copy never becomes a hole", func(t *testing.T) {
		r := &recordingCumulative{}
		c := newCumulativeSettler(r)
		m1, m2, dup := cumMsg("t", 1), cumMsg("t", 2), cumMsg("t", 2)
		c.track(m1)
		c.track(m2)
		c.track(dup)
		require.NoError(t, c.Ack(m1))
		require.NoError(t, c.Ack(m2))
		require.Equal(t, []string{"t/1", "t/2"}, r.acks)
		c.Nack(dup) // already covered: the broker will not deliver it again
		m3 := cumMsg("t", 3)
		c.track(m3)
		require.NoError(t, c.Ack(m3))
		require.Equal(t, []string{"t/1", "t/2", "t/3"}, r.acks, "the covered copy does not block 3")
		c.track(cumMsg("t", 1)) // a covered duplicate is not tracked
		require.NoError(t, c.Ack(cumMsg("t", 1)))
		require.Len(t, r.acks, 3, "and acknowledges nothing")
	})
}
