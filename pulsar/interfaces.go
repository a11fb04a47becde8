package pulsar

import (
	"context"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	engine "github.com/babelqueue/babelqueue-go-pulsar/pulsar/internal/engine"
)

// Sender sends one message and waits for the broker's receipt. The consumer sends retries
// and dead-letter copies through it; apulsar.Producer implements it.
type Sender = engine.Sender

// MessageProducer is what a [Publisher] needs from a producer: synchronous and
// asynchronous sends and a flush. apulsar.Producer implements it.
//
//go:generate go tool -modfile=../tools/go.mod mockgen -destination=../mocks/message_producer.go -package=mocks . MessageProducer
type MessageProducer interface {
	Sender
	// SendAsync enqueues msg and calls done exactly once with the outcome; ctx bounds only
	// the enqueue.
	SendAsync(ctx context.Context, msg *apulsar.ProducerMessage, done func(apulsar.MessageID, *apulsar.ProducerMessage, error))
	// FlushWithCtx sends everything enqueued and waits for the receipts, bounded by ctx.
	FlushWithCtx(ctx context.Context) error
}

// Receiver is the source of messages of a [Consumer]; apulsar.Consumer implements it.
type Receiver = engine.Receiver

// Settler acknowledges messages for a [Consumer]; apulsar.Consumer implements it.
type Settler = engine.Settler

var _ MessageProducer = apulsar.Producer(nil)
