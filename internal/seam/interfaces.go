package seam

import (
	"context"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// Sender sends one message and waits for the broker's receipt. The consumer sends retries
// and dead-letter copies through it; apulsar.Producer implements it.
//
//go:generate go tool -modfile=../../tools/go.mod mockgen -destination=../mocks/sender.go -package=mocks . Sender
type Sender interface {
	// Send sends msg; ctx bounds the whole delivery, receipt included.
	Send(ctx context.Context, msg *apulsar.ProducerMessage) (apulsar.MessageID, error)
}

// Receiver is the source of messages of a pulsar.Consumer; apulsar.Consumer implements it.
//
//go:generate go tool -modfile=../../tools/go.mod mockgen -destination=../mocks/receiver.go -package=mocks . Receiver
type Receiver interface {
	// Receive blocks until a message arrives or ctx ends.
	Receive(ctx context.Context) (apulsar.Message, error)
}

// Settler acknowledges messages for a pulsar.Consumer; apulsar.Consumer implements it.
//
//go:generate go tool -modfile=../../tools/go.mod mockgen -destination=../mocks/settler.go -package=mocks . Settler
type Settler interface {
	// Ack acknowledges msg: the broker will not deliver it again.
	Ack(msg apulsar.Message) error
	// Nack negatively acknowledges msg: the broker delivers it again after the consumer's
	// negative-acknowledgement delay.
	Nack(msg apulsar.Message)
}

// MessageProducer is what a pulsar.Publisher needs from a producer: synchronous and
// asynchronous sends and a flush. apulsar.Producer implements it.
//
//go:generate go tool -modfile=../../tools/go.mod mockgen -destination=../mocks/message_producer.go -package=mocks . MessageProducer
type MessageProducer interface {
	Sender
	// SendAsync enqueues msg and calls done exactly once with the outcome; ctx bounds only
	// the enqueue.
	SendAsync(ctx context.Context, msg *apulsar.ProducerMessage, done func(apulsar.MessageID, *apulsar.ProducerMessage, error))
	// FlushWithCtx sends everything enqueued and waits for the receipts, bounded by ctx.
	FlushWithCtx(ctx context.Context) error
}

var (
	_ MessageProducer = apulsar.Producer(nil)
	_ Sender          = apulsar.Producer(nil)
	_ Receiver        = apulsar.Consumer(nil)
	_ Settler         = apulsar.Consumer(nil)
)
