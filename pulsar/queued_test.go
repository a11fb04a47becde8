package pulsar

import (
	"context"
	"errors"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
)

// chanReceiver is a receiver with the consumer's channel: Receive counts its calls and
// returns errReceive.
type chanReceiver struct {
	ch       chan apulsar.ConsumerMessage
	receives int
	panics   bool // Chan panics, as a zero-queue consumer's does
}

var errReceive = errors.New("Receive was called")

func (r *chanReceiver) Chan() <-chan apulsar.ConsumerMessage {
	if r.panics {
		panic("zeroQueueConsumer cannot support Chan method")
	}
	return r.ch
}

func (r *chanReceiver) Receive(context.Context) (apulsar.Message, error) {
	r.receives++
	return nil, errReceive
}

func TestQueuedFirstTakesAQueuedMessageWithoutReceive(t *testing.T) {
	r := &chanReceiver{ch: make(chan apulsar.ConsumerMessage, 1)}
	recv := queuedFirst(r)
	msg, _ := newMessage(t, testURN, 0, 0)
	r.ch <- apulsar.ConsumerMessage{Message: msg}

	got, err := recv.Receive(t.Context())
	require.NoError(t, err)
	assert.Same(t, msg, got)
	assert.Zero(t, r.receives, "a queued message is taken from the channel")

	// Nothing queued: Receive, as without the fast path.
	_, err = recv.Receive(t.Context())
	require.ErrorIs(t, err, errReceive)
	assert.Equal(t, 1, r.receives)
}

func TestQueuedFirstLeavesTheQueueOnceCtxEnded(t *testing.T) {
	r := &chanReceiver{ch: make(chan apulsar.ConsumerMessage, 1)}
	recv := queuedFirst(r)
	msg, _ := newMessage(t, testURN, 0, 0)
	r.ch <- apulsar.ConsumerMessage{Message: msg}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := recv.Receive(ctx)
	require.ErrorIs(t, err, errReceive, "an ended ctx goes to Receive, which reports it")
	assert.Len(t, r.ch, 1, "the queued message stays for the next receive")
}

func TestQueuedFirstOnAClosedChannelReceives(t *testing.T) {
	r := &chanReceiver{ch: make(chan apulsar.ConsumerMessage)}
	close(r.ch)
	_, err := queuedFirst(r).Receive(t.Context())
	require.ErrorIs(t, err, errReceive, "a closed channel is Receive's to report")
}

func TestQueuedFirstWithoutAChannelIsTheReceiverItself(t *testing.T) {
	panicking := &chanReceiver{panics: true}
	assert.Same(t, seam.Receiver(panicking), queuedFirst(panicking), "a Chan that panics (a zero-queue consumer) is never called again")

	type plain struct{ seam.Receiver }
	p := plain{Receiver: &chanReceiver{}}
	assert.Equal(t, seam.Receiver(p), queuedFirst(p), "a receiver without Chan is used as it is")
}
