// Delayed-delivery publishes messages with a delay (Publisher option WithDelay, which sets
// DeliverAfter and the bq-delay property) and consumes them on two subscriptions: the
// Shared one receives each message only once its delay has passed, while the Exclusive one
// receives them at once, because Pulsar honours delays only on Shared and Key_Shared
// subscriptions.
//
//	go run ./examples/delayed-delivery
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/examples/internal/exampleenv"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// Reminder is the data of urn:babel:reminders:due.
type Reminder struct {
	Name    string `json:"name"`
	DelayMS int64  `json:"delay_ms"`
}

// delivery is one message received on one subscription.
type delivery struct {
	sub     string
	name    string
	delay   time.Duration
	elapsed time.Duration
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		log.Fatalf("delayed-delivery: %v", err)
	}
}

func run(ctx context.Context, w io.Writer) (err error) {
	env, err := exampleenv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	topic := env.Topic("reminders")
	reminders := []Reminder{{"now", 0}, {"in-1s", 1000}, {"in-2s", 2000}}

	var mu sync.Mutex
	var got []delivery
	all := make(chan struct{})
	start := time.Now()
	subscribe := func(name string, t apulsar.SubscriptionType) (*bqpulsar.Consumer, error) {
		return bqpulsar.NewConsumer(env.Client,
			bqpulsar.WithTopic(topic),
			bqpulsar.WithSubscription(name, t),
			bqpulsar.Handle("urn:babel:reminders:due", func(_ context.Context, e *envelope.Envelope, _ apulsar.Message) error {
				var r Reminder
				if err := e.Bind(&r); err != nil {
					return fmt.Errorf("bind reminder: %w", err)
				}
				mu.Lock()
				defer mu.Unlock()
				got = append(got, delivery{name, r.Name, time.Duration(r.DelayMS) * time.Millisecond, time.Since(start)})
				if len(got) == 2*len(reminders) {
					close(all)
				}
				return nil
			}))
	}
	shared, err := subscribe("scheduler", apulsar.Shared)
	if err != nil {
		return fmt.Errorf("subscribe shared: %w", err)
	}
	defer func() { err = errors.Join(err, shared.Close()) }()
	exclusive, err := subscribe("audit", apulsar.Exclusive)
	if err != nil {
		return fmt.Errorf("subscribe exclusive: %w", err)
	}
	defer func() { err = errors.Join(err, exclusive.Close()) }()

	pub, err := bqpulsar.NewPublisher(env.Client, topic)
	if err != nil {
		return fmt.Errorf("create publisher: %w", err)
	}
	defer func() { err = errors.Join(err, pub.Close()) }() //nolint:contextcheck // Close takes no ctx; its close timeout bounds it
	start = time.Now()
	for _, r := range reminders {
		if _, err := pub.Publish(ctx, "urn:babel:reminders:due", r,
			bqpulsar.WithDelay(time.Duration(r.DelayMS)*time.Millisecond)); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	fmt.Fprintf(w, "published %d reminders with delays 0s, 1s and 2s\n", len(reminders))

	if err := exampleenv.RunUntil(ctx, all, shared, exclusive); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	for _, d := range got {
		kind := "Shared: waits for the delay"
		if d.sub == "audit" {
			kind = "Exclusive: delays are not honoured"
		}
		fmt.Fprintf(w, "%-9s %-6s delay %v, received after %.1fs (%s)\n",
			d.sub, d.name, d.delay, d.elapsed.Seconds(), kind)
	}
	return nil
}
