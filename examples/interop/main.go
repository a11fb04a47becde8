// Interop consumes messages produced by other BabelQueue SDKs, byte for byte as they put
// them on the wire: compact PHP JSON with bq-* properties, Python's spaced JSON, a Java
// message with an unknown meta key and an integer beyond float64 precision, and a message
// from an older Go core without any bq-* property. With -fixtures it also publishes the
// valid fixtures of a conformance suite (default ../shared/babelqueue-conformance/fixtures
// when that directory exists).
//
//	go run ./examples/interop
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/examples/internal/exampleenv"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// foreign is a message as another SDK produced it.
type foreign struct {
	from  string
	body  string
	props map[string]string
}

func bqProps(urn, trace, id, lang string) map[string]string {
	return map[string]string{
		"bq-job": urn, "bq-trace-id": trace, "bq-message-id": id,
		"bq-schema-version": "1", "bq-source-lang": lang, "bq-attempts": "0",
	}
}

var samples = []foreign{
	{
		from: "php (compact JSON, bq-* properties)",
		body: `{"job":"urn:babel:orders:created","trace_id":"1f0e2d3c-4b5a-4697-8877-665544332211","data":{"order_id":2001,"currency":"EUR"},"meta":{"id":"aa000000-0000-4000-8000-000000000001","queue":"orders","lang":"php","schema_version":1,"created_at":1767225600000},"attempts":0}`,
		props: bqProps("urn:babel:orders:created", "1f0e2d3c-4b5a-4697-8877-665544332211",
			"aa000000-0000-4000-8000-000000000001", "php"),
	},
	{
		from: "python (json.dumps spacing)",
		body: `{"job": "urn:babel:orders:created", "trace_id": "2f0e2d3c-4b5a-4697-8877-665544332211", "data": {"order_id": 2002, "amount": 19.99, "note": "caf\u00e9"}, "meta": {"id": "aa000000-0000-4000-8000-000000000002", "queue": "orders", "lang": "python", "schema_version": 1, "created_at": 1767225600001}, "attempts": 0}`,
		props: bqProps("urn:babel:orders:created", "2f0e2d3c-4b5a-4697-8877-665544332211",
			"aa000000-0000-4000-8000-000000000002", "python"),
	},
	{
		from: "java (unknown meta key, exact large integer)",
		body: `{"job":"urn:babel:orders:created","trace_id":"3f0e2d3c-4b5a-4697-8877-665544332211","data":{"order_id":9007199254740993,"rate":1.0},"meta":{"id":"aa000000-0000-4000-8000-000000000003","queue":"orders","lang":"java","schema_version":1,"created_at":1767225600002,"tenant":"acme"},"attempts":0}`,
		props: bqProps("urn:babel:orders:created", "3f0e2d3c-4b5a-4697-8877-665544332211",
			"aa000000-0000-4000-8000-000000000003", "java"),
	},
	{
		from: "an older Go core (no properties: routed on the body's URN)",
		body: `{"job":"urn:babel:orders:created","trace_id":"4f0e2d3c-4b5a-4697-8877-665544332211","data":{"order_id":2004},"meta":{"id":"aa000000-0000-4000-8000-000000000004","queue":"orders","lang":"go","schema_version":1,"created_at":1767225600003},"attempts":1}`,
	},
}

func main() {
	def := ""
	if _, err := os.Stat("../shared/babelqueue-conformance/fixtures"); err == nil {
		def = "../shared/babelqueue-conformance/fixtures"
	}
	fixtures := flag.String("fixtures", def, "also publish the valid envelopes in this `directory` (conformance fixtures)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout, *fixtures)
	cancel()
	if err != nil {
		log.Fatalf("interop: %v", err)
	}
}

// loadFixtures returns the acceptable envelopes of dir as foreign messages without
// properties, in name order.
func loadFixtures(dir string) ([]foreign, error) {
	if dir == "" {
		return nil, nil
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("list fixtures: %w", err)
	}
	sort.Strings(names)
	var out []foreign
	for _, name := range names {
		b, err := os.ReadFile(name) //nolint:gosec // the directory the user names
		if err != nil {
			return nil, fmt.Errorf("read fixture: %w", err)
		}
		if _, err := envelope.Classify(b); err != nil {
			continue // invalid on purpose: the consumer would dead-letter it as poison
		}
		out = append(out, foreign{from: "fixture " + filepath.Base(name), body: string(b)})
	}
	return out, nil
}

func run(ctx context.Context, w io.Writer, fixtureDir string) (err error) {
	extra, err := loadFixtures(fixtureDir)
	if err != nil {
		return err
	}
	all := append(append([]foreign(nil), samples...), extra...)

	env, err := exampleenv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	topic := env.Topic("interop")

	var handled atomic.Int32
	done := make(chan struct{})
	handler := func(_ context.Context, e *envelope.Envelope, msg apulsar.Message) error {
		_, hasProps := msg.Properties()[bqpulsar.PropJob]
		fmt.Fprintf(w, "handled %s from lang=%s (bq-* properties: %v) attempts=%d data=%s\n",
			e.URN(), e.Meta.Lang, hasProps, e.Attempts, e.Data)
		if int(handled.Add(1)) == len(all) {
			close(done)
		}
		return nil
	}
	opts := []bqpulsar.ConsumerOption{
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("interop", apulsar.Exclusive),
		bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(e bqpulsar.Event) {
			switch e.Kind { //nolint:exhaustive // only the failures are printed
			case bqpulsar.EventFailed, bqpulsar.EventPoison, bqpulsar.EventGateRejected, bqpulsar.EventUnknownURN,
				bqpulsar.EventNacked, bqpulsar.EventError:
				fmt.Fprintf(w, "error: %v\n", e.Err)
			}
		}}),
	}
	urns := map[string]bool{}
	for _, f := range all {
		e, err := envelope.Classify([]byte(f.body))
		if err != nil {
			return fmt.Errorf("sample from %s: %w", f.from, err)
		}
		if !urns[e.URN()] {
			urns[e.URN()] = true
			opts = append(opts, bqpulsar.Handle(e.URN(), handler))
		}
	}
	consumer, err := bqpulsar.NewConsumer(env.Client, opts...)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer func() { err = errors.Join(err, consumer.Close()) }()

	// The raw client stands in for the other SDKs: the bytes go out exactly as written.
	producer, err := env.Client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	if err != nil {
		return fmt.Errorf("create producer: %w", err)
	}
	defer producer.Close()
	for _, f := range all {
		if _, err := producer.Send(ctx, &apulsar.ProducerMessage{Payload: []byte(f.body), Properties: f.props}); err != nil {
			return fmt.Errorf("send the %s message: %w", f.from, err)
		}
		fmt.Fprintf(w, "sent as %s\n", f.from)
	}

	if err := exampleenv.RunUntil(ctx, done, consumer); err != nil {
		return fmt.Errorf("handled %d of %d foreign messages: %w", handled.Load(), len(all), err)
	}
	fmt.Fprintf(w, "done: %d foreign messages handled\n", len(all))
	return nil
}
