package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// runPublish implements `bq publish`.
func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bq publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conn connFlags
	conn.register(fs)
	topic := fs.String("topic", "", "`topic` to publish to, e.g. orders or persistent://public/default/orders (required)")
	urn := fs.String("urn", "", "the job `URN`, e.g. urn:babel:orders:created (required)")
	data := fs.String("data", "{}", "the data as a JSON object, or @file to read it from a file (@- for standard input)")
	queue := fs.String("queue", "", "logical queue `name` for meta.queue (default: derived from the topic)")
	delay := fs.Duration("delay", 0, "deliver after this `duration` (honoured on Shared and Key_Shared subscriptions)")
	key := fs.String("key", "", "message `key`")
	orderingKey := fs.String("ordering-key", "", "message ordering `key`")
	traceID := fs.String("trace-id", "", "continue this trace `id` instead of minting one")
	count := fs.Int("count", 1, "publish the message this many `times` (each with its own meta.id)")
	headers := headerFlags{}
	fs.Var(headers, "header", "extra property `key=value` (repeatable; bq-* properties always win)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bq publish --topic TOPIC --urn URN [--data JSON|@file] [flags]

Publishes a BabelQueue envelope and prints its meta.id, one line per message.

Example:

	bq publish --topic orders --urn urn:babel:orders:created --data '{"order_id":1042}'

Flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	fail := func(err error) int { return failLine(stderr, "bq publish", err) }
	if *topic == "" || *urn == "" {
		fmt.Fprintln(stderr, "bq publish: --topic and --urn are required")
		return exitUsage
	}
	if *count < 1 {
		fmt.Fprintln(stderr, "bq publish: --count must be at least 1")
		return exitUsage
	}
	raw, err := readData(*data)
	if err != nil {
		return fail(err)
	}
	var opts []bqpulsar.PublishOption
	if *delay > 0 {
		opts = append(opts, bqpulsar.WithDelay(*delay))
	}
	if len(headers) > 0 {
		opts = append(opts, bqpulsar.WithHeaders(headers))
	}
	if *key != "" {
		opts = append(opts, bqpulsar.WithKey(*key))
	}
	if *orderingKey != "" {
		opts = append(opts, bqpulsar.WithOrderingKey(*orderingKey))
	}
	if *traceID != "" {
		opts = append(opts, bqpulsar.WithTraceID(*traceID))
	}
	var pubOpts []bqpulsar.PublisherOption
	if *queue != "" {
		pubOpts = append(pubOpts, bqpulsar.WithQueue(*queue))
	}

	client, err := conn.client(stderr)
	if err != nil {
		return fail(err)
	}
	defer client.Close()
	pub, err := bqpulsar.NewPublisher(client, *topic, pubOpts...)
	if err != nil {
		return fail(err)
	}
	defer func() { //nolint:contextcheck // Close takes no ctx; WithCloseTimeout bounds it
		if err := pub.Close(); err != nil {
			fmt.Fprintf(stderr, "bq publish: close: %v\n", err)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, conn.timeout+time.Duration(*count)*time.Second)
	defer cancel()
	for range *count {
		id, err := pub.Publish(ctx, *urn, raw, opts...)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, id)
	}
	return exitOK
}

// readData returns the JSON object given on the command line, read from a file for @file
// or from standard input for @-.
func readData(arg string) (json.RawMessage, error) {
	b := []byte(arg)
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if name == "-" {
			b, err = io.ReadAll(os.Stdin)
		} else {
			b, err = os.ReadFile(name) //nolint:gosec // reading the file the user names is the point
		}
		if err != nil {
			return nil, fmt.Errorf("read data: %w", err)
		}
	}
	trimmed := strings.TrimLeft(string(b), " \t\r\n")
	if !json.Valid(b) || !strings.HasPrefix(trimmed, "{") {
		return nil, fmt.Errorf("data must be a JSON object, got %q", shorten(string(b), 60))
	}
	return json.RawMessage(b), nil
}

// shorten cuts s to at most n bytes for error messages.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
