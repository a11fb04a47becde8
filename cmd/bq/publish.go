package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// runPublish implements `bq publish`.
func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "bq publish"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	topic := fs.String("topic", "", "`topic` to publish to, e.g. orders or persistent://public/default/orders (required)")
	urn := fs.String("urn", "", "the job `URN`, e.g. urn:babel:orders:created (required)")
	data := fs.String("data", "{}", "the data as a JSON object, or @file to read it from a file (@- for standard input)")
	queue := fs.String("queue", "", "logical queue `name` for meta.queue (default: derived from the topic)")
	delay := newDurationFlag(fs, "delay", 0, false,
		"deliver after this `duration` (honoured on Shared and Key_Shared subscriptions)")
	key := fs.String("key", "", "message `key`")
	orderingKey := fs.String("ordering-key", "", "message ordering `key`")
	traceID := fs.String("trace-id", "", "continue this trace `id` instead of minting one")
	count := newIntFlag(fs, "count", 1, 1, "publish the message this many `times` (each with its own meta.id)")
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
	fail := func(err error) int { return failLine(stderr, name, err) }
	if *topic == "" || *urn == "" {
		return usageLine(stderr, name, "--topic and --urn are required")
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

	client, err := conn.connect(ctx, stderr)
	if err != nil {
		return fail(err)
	}
	defer client.Close()
	pub, err := await(ctx, func() (*bqpulsar.Publisher, error) {
		return bqpulsar.NewPublisher(client, *topic, pubOpts...)
	})
	if err != nil {
		return fail(conn.wrap(err))
	}
	defer func() {
		if ctx.Err() != nil {
			return // interrupted: do not wait for the flush
		}
		if err := pub.Close(); err != nil { //nolint:contextcheck // Close takes no ctx; WithCloseTimeout bounds it
			fmt.Fprintf(stderr, "%s: close: %s\n", name, oneLine(err.Error()))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, conn.timeout+time.Duration(*count)*time.Second)
	defer cancel()
	for range *count {
		id, err := pub.Publish(ctx, *urn, raw, opts...)
		if err != nil {
			return fail(conn.wrap(err))
		}
		fmt.Fprintln(stdout, id)
	}
	return exitOK
}

// readData returns the JSON object given on the command line, read from a file for @file
// or from standard input for @-. Every failure is a usageError; a syntax error names its
// line, column and byte offset.
func readData(arg string) (json.RawMessage, error) {
	b := []byte(arg)
	where := "--data"
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if name == "-" {
			where = "standard input"
			b, err = io.ReadAll(os.Stdin)
		} else {
			where = name
			b, err = os.ReadFile(name) //nolint:gosec // reading the file the user names is the point
		}
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is named below
			}
			return nil, usagef("read data from %s: %v", where, err)
		}
	}
	if err := checkObject(b); err != nil {
		return nil, usageError{fmt.Errorf("data (%s) %w", where, err)}
	}
	return json.RawMessage(b), nil
}

// checkObject reports why b is not one JSON object, with the position of the problem.
func checkObject(b []byte) error {
	if !utf8.Valid(b) {
		off := invalidUTF8Offset(b)
		return fmt.Errorf("is not valid UTF-8 at %s", position(b, off))
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// Offset counts the bytes read, the bad one included; at the end of the input
			// there is no bad byte.
			off := int(se.Offset)
			if off > 0 && off <= len(b) && !strings.Contains(se.Error(), "end of JSON input") {
				off--
			}
			return fmt.Errorf("is not valid JSON: %s at %s", se.Error(), position(b, off))
		}
		return fmt.Errorf("is not valid JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		start := len(b) - len(strings.TrimLeft(string(b), " \t\r\n"))
		return fmt.Errorf("must be a JSON object, got %s at %s", jsonKind(v), position(b, start))
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return "null"
	}
}

// position renders a byte offset as "line L, column C (offset O)", counting columns in
// characters from 1.
func position(b []byte, off int) string {
	off = min(max(off, 0), len(b))
	line, col := 1, 1
	for _, r := range string(b[:off]) {
		if r == '\n' {
			line, col = line+1, 1
			continue
		}
		col++
	}
	return fmt.Sprintf("line %d, column %d (offset %d)", line, col, off)
}

func invalidUTF8Offset(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}
