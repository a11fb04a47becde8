// Quickstart shows the BabelQueue envelope codec at work: it builds an order envelope,
// encodes it canonically, projects its Pulsar properties, classifies it as a consumer
// would, re-emits it as a retry would, and shows how a poison body is rejected and
// dead-lettered without losing a byte.
//
//	go run ./examples/quickstart
//
// The publish/consume demo on the embedded Pulsar broker replaces this program once the
// publisher and consumer land.
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// Order is the data of urn:babel:orders:created in this demo.
type Order struct {
	OrderID    int64  `json:"order_id"`
	TotalCents int64  `json:"total_cents"`
	Currency   string `json:"currency"`
}

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatalf("quickstart: %v", err)
	}
}

func run(w io.Writer) error {
	// 1. Build and encode an envelope, as the publisher does.
	env, err := envelope.Make("urn:babel:orders:created",
		Order{OrderID: 1042, TotalCents: 1999, Currency: "EUR"},
		envelope.WithQueue("orders"))
	if err != nil {
		return fmt.Errorf("make: %w", err)
	}
	body, err := env.Encode()
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	fmt.Fprintf(w, "1. encoded envelope (%d bytes): job=%s data=%s attempts=%d\n",
		len(body), env.Job, env.Data, env.Attempts)

	// 2. The six bq-* properties that travel beside the payload on Pulsar.
	props := bqpulsar.ProjectProperties(env)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "2. properties: %d\n", len(props))
	for _, k := range keys {
		if k == bqpulsar.PropTraceID || k == bqpulsar.PropMessageID {
			fmt.Fprintf(w, "   %-17s <uuid>\n", k) // fresh per message
			continue
		}
		fmt.Fprintf(w, "   %-17s %s\n", k, props[k])
	}

	// 3. A consumer gates, classifies and binds the data to a Go type.
	if err := bqpulsar.GateVerdict(props[bqpulsar.PropSchemaVersion], true); err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	received, err := envelope.Classify(body)
	if err != nil {
		return fmt.Errorf("classify: %w", err)
	}
	var order Order
	if err := received.Bind(&order); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	fmt.Fprintf(w, "3. accepted %s: order %d, %d %s cents\n", received.URN(), order.OrderID, order.TotalCents, order.Currency)

	// 4. A retry re-emits the message: only attempts changes, the data text is kept as is,
	//    exact numbers included.
	foreign := []byte(`{"job":"urn:babel:ledger:posted","trace_id":"5d0c8a4e-2b1f-4c3d-9e8f-a1b2c3d4e5f6",` +
		`"data":{"amount":9007199254740993,"rate":1.0},"meta":{"id":"0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d",` +
		`"queue":"ledger","lang":"java","schema_version":1,"created_at":1767225600000,"tenant":"t-9"},"attempts":0}`)
	ledger, err := envelope.Classify(foreign)
	if err != nil {
		return fmt.Errorf("classify ledger: %w", err)
	}
	_, counted := bqpulsar.Reconcile("0", true, ledger.Attempts, 0)
	retry, err := ledger.WithAttempts(counted).Encode()
	if err != nil {
		return fmt.Errorf("re-encode: %w", err)
	}
	fmt.Fprintf(w, "4. retry copy: %s\n", retry)

	// 5. A poison body is rejected with the rule it broke, and its dead-letter copy keeps
	//    the exact bytes.
	poison := []byte(`{"JOB":"urn:babel:orders:created","data":[]}`)
	_, err = envelope.Classify(poison)
	var pe *envelope.PoisonError
	if !errors.As(err, &pe) {
		return fmt.Errorf("expected a poison verdict, got %w", err)
	}
	fmt.Fprintf(w, "5. poison (rule %s): %v\n", pe.Rule, err)
	copyBody, err := envelope.PoisonCopy(poison, envelope.DeadLetterInfo{
		Reason: envelope.ReasonPoison, Cause: err, Queue: "orders", Attempts: 1,
		FailedAt: time.UnixMilli(1767225600000),
	})
	if err != nil {
		return fmt.Errorf("poison copy: %w", err)
	}
	fmt.Fprintf(w, "   dead-letter copy for orders.dlq: %s\n", copyBody)
	return nil
}
