package messaging_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
)

// Process transforms every payload of an incoming connector channel and
// sends the result to an outgoing one; the input is acked once the output
// was acked by the sink (Post).
func ExampleProcess() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := messaging.LoadConfig(messaging.FromMap(map[string]string{
		"mp.messaging.incoming.orders-in.connector":    "in-memory",
		"mp.messaging.incoming.orders-in.codec":        "string",
		"mp.messaging.outgoing.invoices-out.connector": "in-memory",
		"mp.messaging.outgoing.invoices-out.codec":     "string",
	}))
	if err != nil {
		fmt.Println("config:", err)
		return
	}
	conn := inmemory.New()
	rt := messaging.New(cfg, messaging.WithConnector(conn))
	messaging.Process(rt, "orders-in", "invoices-out", func(_ context.Context, order string) (string, error) {
		return "invoice for " + strings.ToUpper(order), nil
	})
	if err := rt.Start(ctx); err != nil {
		fmt.Println("start:", err)
		return
	}
	conn.Source("orders-in").SendString("order-1")
	if err := conn.Source("orders-in").WaitSettled(ctx, 1); err != nil {
		fmt.Println("wait:", err)
	}
	fmt.Println(conn.Sink("invoices-out").Payloads())
	acked, nacked := conn.Source("orders-in").Counts()
	fmt.Println("acked:", acked, "nacked:", nacked)
	if err := rt.Shutdown(ctx); err != nil {
		fmt.Println("shutdown:", err)
	}
	// Output:
	// [invoice for ORDER-1]
	// acked: 1 nacked: 0
}

// An Emitter sends values from imperative code; Send waits for the
// settlement: nil when the consumer acked, the reason when it nacked.
func ExampleEmitter() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := messaging.LoadConfig()
	if err != nil {
		fmt.Println("config:", err)
		return
	}
	rt := messaging.New(cfg)
	em := messaging.NewEmitter[int](rt, "numbers")
	messaging.Consume(rt, "numbers", func(_ context.Context, n int) error {
		if n < 0 {
			return fmt.Errorf("negative: %d", n)
		}
		return nil
	})
	if err := rt.Start(ctx); err != nil {
		fmt.Println("start:", err)
		return
	}
	fmt.Println(em.Send(ctx, 1))
	fmt.Println(em.Send(ctx, -1))
	if err := rt.Shutdown(ctx); err != nil {
		fmt.Println("shutdown:", err)
	}
	_, err = em.Emit(2)
	fmt.Println(err)
	// Output:
	// <nil>
	// messaging: message nacked: negative: -1
	// messaging: emitter terminated
}

// NackWith passes nack options with the error of a payload function: here a
// permanent failure goes to the dead letter instead of being redelivered.
func ExampleNackWith() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := messaging.LoadConfig(messaging.FromMap(map[string]string{
		"mp.messaging.incoming.in.connector": "in-memory",
	}))
	if err != nil {
		fmt.Println("config:", err)
		return
	}
	conn := inmemory.New()
	rt := messaging.New(cfg, messaging.WithConnector(conn))
	messaging.Consume(rt, "in", func(_ context.Context, p []byte) error {
		return messaging.NackWith(fmt.Errorf("unsupported order %q", p), messaging.ToDeadLetter())
	})
	if err := rt.Start(ctx); err != nil {
		fmt.Println("start:", err)
		return
	}
	conn.Source("in").SendString("x")
	if err := conn.Source("in").WaitSettled(ctx, 1); err != nil {
		fmt.Println("wait:", err)
	}
	st := conn.Source("in").Settlements()[0]
	fmt.Println(st.Reason, st.Options.Disposition == messaging.DeadLetter)
	if err := rt.Shutdown(ctx); err != nil {
		fmt.Println("shutdown:", err)
	}
	// Output:
	// unsupported order "x" true
}
