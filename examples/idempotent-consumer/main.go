// Idempotent-consumer shows one effect per message under a redelivery storm: every order is
// delivered three times (the same envelope, the same meta.id, as a broker redelivers it
// after a lost acknowledgement), four workers race for the copies, and the card is charged
// once per order. The idempotency guard claims each meta.id with a lease before the handler
// runs, remembers it when the handler succeeds, and acknowledges the duplicates without
// running it. Set REDIS_ADDR (host:port) to keep the ids in Redis, shared by every worker
// process, instead of in memory.
//
//	go run ./examples/idempotent-consumer
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
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/redis/go-redis/v9"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/examples/internal/exampleenv"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency/redisstore"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// Order is the data of urn:babel:orders:created.
type Order struct {
	ID    int   `json:"order_id"`
	Cents int64 `json:"total_cents"`
}

const (
	orders     = 5
	copies     = 3 // each order is delivered this many times
	ordersURN  = "urn:babel:orders:created"
	workerPool = 4
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		log.Fatalf("idempotent-consumer: %v", err)
	}
}

// store returns the Redis store when REDIS_ADDR is set, the in-memory one otherwise, and a
// function that releases it.
func store(ctx context.Context, w io.Writer) (idempotency.Store, func() error, error) {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		s, err := idempotency.NewMemoryStore(idempotency.WithMaxEntries(10_000))
		fmt.Fprintln(w, "store: in memory (set REDIS_ADDR to share it through Redis)")
		return s, func() error { return nil }, err
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	if err := client.Ping(ctx).Err(); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("redis at %s: %w", addr, err), client.Close())
	}
	s, err := redisstore.New(client, redisstore.WithKeyPrefix(fmt.Sprintf("example:%d:", time.Now().UnixNano())))
	fmt.Fprintf(w, "store: redis at %s (from REDIS_ADDR)\n", addr)
	return s, client.Close, err
}

func run(ctx context.Context, w io.Writer) (err error) {
	env, err := exampleenv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	topic := env.Topic("orders")

	st, closeStore, err := store(ctx, w)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeStore()) }()
	guard, err := idempotency.New(st,
		idempotency.WithLease(30*time.Second),              // longer than the slowest charge
		idempotency.WithTTL(24*time.Hour),                  // how long a duplicate is recognised
		idempotency.WithInFlightRetry(50*time.Millisecond), // a copy racing the first run retries soon
	)
	if err != nil {
		return fmt.Errorf("guard: %w", err)
	}

	var mu sync.Mutex
	charged := map[int]int{} // the side effect: charges per order
	var deliveries, charges atomic.Int64
	done := make(chan struct{})
	var closeOnce sync.Once
	// count sees every delivery's outcome, outside the guard: a duplicate is acknowledged
	// (nil) without reaching the handler.
	count := func(next bqpulsar.HandlerFunc) bqpulsar.HandlerFunc {
		return func(ctx context.Context, e *envelope.Envelope, m apulsar.Message) error {
			err := next(ctx, e, m)
			if err == nil && deliveries.Add(1) == orders*copies {
				closeOnce.Do(func() { close(done) })
			}
			return err
		}
	}
	consumer, err := bqpulsar.NewConsumer(env.Client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("billing", apulsar.Shared),
		bqpulsar.WithConcurrency(workerPool),
		bqpulsar.WithMaxAttempts(20),
		bqpulsar.WithHooks(bqpulsar.Hooks{Handler: count}),
		bqpulsar.WithHooks(bqpulsar.Hooks{Handler: guard.Middleware()}),
		bqpulsar.Handle(ordersURN, func(_ context.Context, e *envelope.Envelope, _ apulsar.Message) error {
			var o Order
			if err := e.Bind(&o); err != nil {
				return fmt.Errorf("bind order: %w", err)
			}
			mu.Lock()
			charged[o.ID]++
			mu.Unlock()
			charges.Add(1)
			return nil
		}),
	)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer func() { err = errors.Join(err, consumer.Close()) }()

	pub, err := bqpulsar.NewPublisher(env.Client, topic)
	if err != nil {
		return fmt.Errorf("create publisher: %w", err)
	}
	defer func() { err = errors.Join(err, pub.Close()) }() //nolint:contextcheck // Close takes no ctx; its close timeout bounds it
	for i := 1; i <= orders; i++ {
		e, err := envelope.Make(ordersURN, Order{ID: i, Cents: int64(i) * 250})
		if err != nil {
			return fmt.Errorf("build order %d: %w", i, err)
		}
		for range copies {
			if _, err := pub.PublishEnvelope(ctx, e); err != nil {
				return fmt.Errorf("publish: %w", err)
			}
		}
	}
	fmt.Fprintf(w, "published %d orders, each %d times (the same meta.id)\n", orders, copies)

	if err := exampleenv.RunUntil(ctx, done, consumer); err != nil {
		return err
	}

	mu.Lock()
	defer mu.Unlock()
	ids := make([]int, 0, len(charged))
	for id := range charged {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		fmt.Fprintf(w, "order %d: charged %d time(s)\n", id, charged[id])
	}
	fmt.Fprintf(w, "done: %d deliveries acknowledged, %d charges, %d duplicates skipped\n",
		deliveries.Load(), charges.Load(), deliveries.Load()-charges.Load())
	return nil
}
