// Key-shared-ordering runs two consumers on one Key_Shared subscription, each handling up
// to four messages at a time, and shows that the events of one key are handled in the
// order they were published and by one consumer, while different keys are spread out and
// handled in parallel. The publisher batches per key (the SDK's default) so that the
// broker can route every message by its own key.
//
//	go run ./examples/key-shared-ordering
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/examples/internal/exampleenv"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// Event is the data of urn:babel:accounts:changed: the seq-th change of one account.
type Event struct {
	Account string `json:"account"`
	Seq     int    `json:"seq"`
}

const (
	accounts = 4
	perKey   = 5
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		log.Fatalf("key-shared-ordering: %v", err)
	}
}

func run(ctx context.Context, w io.Writer) (err error) {
	env, err := exampleenv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	topic := env.Topic("accounts")

	var mu sync.Mutex
	order := map[string][]int{}            // account -> seqs in handling order
	owners := map[string]map[string]bool{} // account -> consumers that handled it
	done := make(chan struct{})
	total := 0
	newConsumer := func(name string) (*bqpulsar.Consumer, error) {
		return bqpulsar.NewConsumer(env.Client,
			bqpulsar.WithTopic(topic),
			bqpulsar.WithSubscription("ledger", apulsar.KeyShared),
			bqpulsar.WithConcurrency(4), // parallel across keys, in order within a key
			bqpulsar.WithConsumerOptions(func(o *apulsar.ConsumerOptions) { o.Name = name }),
			bqpulsar.Handle("urn:babel:accounts:changed", func(_ context.Context, e *envelope.Envelope, _ apulsar.Message) error {
				var ev Event
				if err := e.Bind(&ev); err != nil {
					return fmt.Errorf("bind event: %w", err)
				}
				time.Sleep(5 * time.Millisecond) // some work, so that keys overlap in time
				mu.Lock()
				defer mu.Unlock()
				order[ev.Account] = append(order[ev.Account], ev.Seq)
				if owners[ev.Account] == nil {
					owners[ev.Account] = map[string]bool{}
				}
				owners[ev.Account][name] = true
				if total++; total == accounts*perKey {
					close(done)
				}
				return nil
			}))
	}
	var consumers []*bqpulsar.Consumer
	defer func() {
		for _, c := range consumers {
			err = errors.Join(err, c.Close())
		}
	}()
	for _, name := range []string{"consumer-a", "consumer-b"} {
		c, err := newConsumer(name)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", name, err)
		}
		consumers = append(consumers, c)
	}

	pub, err := bqpulsar.NewPublisher(env.Client, topic)
	if err != nil {
		return fmt.Errorf("create publisher: %w", err)
	}
	defer func() { err = errors.Join(err, pub.Close()) }() //nolint:contextcheck // Close takes no ctx; its close timeout bounds it
	// Interleave the accounts: a1#1, a2#1, a3#1, a4#1, a1#2, …
	for seq := 1; seq <= perKey; seq++ {
		for a := 1; a <= accounts; a++ {
			account := fmt.Sprintf("account-%d", a)
			if _, err := pub.Publish(ctx, "urn:babel:accounts:changed", Event{account, seq},
				bqpulsar.WithKey(account)); err != nil {
				return fmt.Errorf("publish: %w", err)
			}
		}
	}
	fmt.Fprintf(w, "published %d events for %d accounts, interleaved\n", accounts*perKey, accounts)

	if err := exampleenv.RunUntil(ctx, done, consumers...); err != nil {
		return err
	}

	mu.Lock()
	defer mu.Unlock()
	names := make([]string, 0, len(order))
	for k := range order {
		names = append(names, k)
	}
	sort.Strings(names)
	inOrder := 0
	for _, k := range names {
		seqs := order[k]
		ok := sort.IntsAreSorted(seqs) && len(seqs) == perKey
		if ok {
			inOrder++
		}
		fmt.Fprintf(w, "%s: handled %v by %d consumer(s), in order: %v\n", k, seqs, len(owners[k]), ok)
	}
	fmt.Fprintf(w, "done: %d of %d accounts handled in publish order\n", inOrder, accounts)
	return nil
}
