// Reactive-pipeline is an invoicing service on the messaging runtime:
// it reads orders from Pulsar (channel orders-in), turns each into an invoice and writes
// it to Pulsar (channel invoices-out), configured by application.properties through the
// babelqueue-pulsar connector. An order with a negative total fails: it is retried until
// max-attempts deliveries, then written to orders.dlq. An order is acknowledged only once
// its invoice was confirmed by the broker.
//
//	go run ./examples/reactive-pipeline
package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/examples/internal/exampleenv"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
)

//go:embed application.properties
var properties []byte

// Order is what arrives on orders-in.
type Order struct {
	ID    string `json:"id"`
	Total int64  `json:"total_cents"`
}

// Invoice is what leaves on invoices-out.
type Invoice struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount_cents"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		log.Fatalf("reactive-pipeline: %v", err)
	}
}

var orders = []Order{{"o-1", 1250}, {"o-2", 990}, {"o-3", -100}, {"o-4", 4200}, {"o-5", 15}}

func run(ctx context.Context, w io.Writer) (err error) {
	env, err := exampleenv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	ordersTopic, invoicesTopic := env.Topic("orders"), env.Topic("invoices")

	// The properties file, with the broker and topics of this run on top (ordinal 400 > 100).
	cfg, err := messaging.LoadConfig(
		messaging.FromProperties("application.properties", bytes.NewReader(properties)),
		messaging.FromEnv(), // e.g. MP_MESSAGING_INCOMING_ORDERS_IN_MAX_ATTEMPTS=5
		messaging.FromMap(map[string]string{
			"mp.messaging.connector.babelqueue-pulsar.serviceUrl": env.URL,
			"mp.messaging.incoming.orders-in.topic":               ordersTopic,
			"mp.messaging.outgoing.invoices-out.topic":            invoicesTopic,
		}),
	)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	conn, err := connector.New()
	if err != nil {
		return fmt.Errorf("connector: %w", err)
	}
	rt := messaging.New(cfg, messaging.WithConnector(conn))
	// Default ack (Post): an order is acked once its invoice is confirmed by the broker.
	messaging.Process(rt, "orders-in", "invoices-out", func(_ context.Context, o Order) (Invoice, error) {
		if o.Total < 0 {
			return Invoice{}, fmt.Errorf("order %s: negative total %d", o.ID, o.Total) // nack → retries, then orders.dlq
		}
		return Invoice{OrderID: o.ID, Amount: o.Total}, nil
	})

	// Read the results on their own subscriptions before anything is published.
	invoices, err := env.Client.Subscribe(apulsar.ConsumerOptions{Topic: invoicesTopic, SubscriptionName: "audit"})
	if err != nil {
		return fmt.Errorf("subscribe to invoices: %w", err)
	}
	defer invoices.Close()
	dead, err := env.Client.Subscribe(apulsar.ConsumerOptions{Topic: ordersTopic + ".dlq", SubscriptionName: "audit"})
	if err != nil {
		return fmt.Errorf("subscribe to the dead letters: %w", err)
	}
	defer dead.Close()

	if err := rt.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = errors.Join(err, rt.Shutdown(sctx))
	}()
	h := rt.Health()
	fmt.Fprintf(w, "runtime started: ready=%t live=%t\n", h.Ready, h.Live)

	if err := publish(ctx, env.Client, ordersTopic); err != nil {
		return err
	}
	fmt.Fprintf(w, "published %d orders\n", len(orders))

	var lines []string
	for range len(orders) - 1 {
		m, err := invoices.Receive(ctx)
		if err != nil {
			return fmt.Errorf("receive an invoice: %w", err)
		}
		var inv Invoice
		if err := json.Unmarshal(m.Payload(), &inv); err != nil {
			return fmt.Errorf("invoice %q: %w", m.Payload(), err)
		}
		lines = append(lines, fmt.Sprintf("invoice: order %s, %d cents", inv.OrderID, inv.Amount))
		_ = invoices.Ack(m)
	}
	slices.Sort(lines) // retries may reorder; print deterministically
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	m, err := dead.Receive(ctx)
	if err != nil {
		return fmt.Errorf("receive the dead letter: %w", err)
	}
	fmt.Fprintf(w, "dead letter: %s attempts=%s\n", m.Payload(), m.Properties()[bqpulsar.PropAttempts])
	_ = dead.Ack(m)
	fmt.Fprintf(w, "done: %d invoices, 1 dead letter\n", len(lines))
	return nil
}

func publish(ctx context.Context, client apulsar.Client, topic string) error {
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	if err != nil {
		return fmt.Errorf("create the order producer: %w", err)
	}
	defer p.Close()
	for _, o := range orders {
		b, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("encode order: %w", err)
		}
		if _, err := p.Send(ctx, &apulsar.ProducerMessage{Payload: b}); err != nil {
			return fmt.Errorf("publish order %s: %w", o.ID, err)
		}
	}
	return nil
}
