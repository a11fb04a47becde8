package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// source is what tail reads from: a reader (no acks) or a subscription (acks).
type source interface {
	next(ctx context.Context) (apulsar.Message, error)
	done(msg apulsar.Message) error
	close()
}

type readerSource struct{ r apulsar.Reader }

func (s readerSource) next(ctx context.Context) (apulsar.Message, error) {
	m, err := s.r.Next(ctx)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return m, nil
}
func (readerSource) done(apulsar.Message) error { return nil }
func (s readerSource) close()                   { s.r.Close() }

type consumerSource struct{ c apulsar.Consumer }

func (s consumerSource) next(ctx context.Context) (apulsar.Message, error) {
	m, err := s.c.Receive(ctx)
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	return m, nil
}

func (s consumerSource) done(m apulsar.Message) error {
	if err := s.c.Ack(m); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}
func (s consumerSource) close() { s.c.Close() }

// runTail implements `bq tail`.
func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "bq tail"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	topic := fs.String("topic", "", "`topic` to read (required)")
	sub := fs.String("subscription", "", "read through this durable subscription and ack what is printed (default: a reader that acks nothing)")
	from := newEnumFlag(fs, "from", "earliest", []string{"earliest", "latest"}, "where a reader or a new subscription starts:")
	limit := newIntFlag(fs, "n", 0, 0, "stop after this many messages (0: no limit)")
	wait := newDurationFlag(fs, "wait", 2*time.Second, false,
		"stop when no message arrived for this long (0: follow until interrupted)")
	raw := fs.Bool("raw", false, "print each payload's bytes as they are, control characters included (default: escaped)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bq tail --topic TOPIC [--subscription NAME] [flags]

Prints the messages of a topic: their key, ordering key and properties, the consumer's
verdict (accepted with URN and attempts, and the URN it is routed to when its bq-job
property names another; poison with the broken rule; or rejected by the schema-version
gate) and the pretty-printed payload. Without --subscription nothing is
acknowledged. Terminal control characters in message values are shown escaped.

Example:

	bq tail --topic orders -n 10

Flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	fail := func(err error) int { return failLine(stderr, name, err) }
	if *topic == "" {
		return usageLine(stderr, name, "--topic is required")
	}
	client, err := conn.connect(ctx, stderr)
	if err != nil {
		return fail(err)
	}
	defer client.Close()
	src, err := await(ctx, func() (source, error) { return openSource(client, *topic, *sub, *from) })
	if err != nil {
		return fail(conn.wrap(err))
	}
	defer src.close()

	n := 0
	for *limit == 0 || n < *limit {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if *wait > 0 {
			rctx, cancel = context.WithTimeout(ctx, *wait)
		}
		msg, err := src.next(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				break
			}
			return fail(conn.wrap(err))
		}
		printMessage(stdout, msg, *raw)
		if err := src.done(msg); err != nil {
			return fail(conn.wrap(err))
		}
		n++
	}
	fmt.Fprintf(stdout, "%d message(s)\n", n)
	if ctx.Err() != nil {
		return exitInterrupted
	}
	return exitOK
}

func openSource(client apulsar.Client, topic, sub, from string) (source, error) {
	if sub == "" {
		start := apulsar.EarliestMessageID()
		if from == "latest" {
			start = apulsar.LatestMessageID()
		}
		r, err := client.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: start})
		if err != nil {
			return nil, fmt.Errorf("create reader on %s: %w", topic, err)
		}
		return readerSource{r}, nil
	}
	pos := apulsar.SubscriptionPositionEarliest
	if from == "latest" {
		pos = apulsar.SubscriptionPositionLatest
	}
	c, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: sub, Type: apulsar.Shared,
		SubscriptionInitialPosition: pos,
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s to %s: %w", sub, topic, err)
	}
	return consumerSource{c}, nil
}

// printMessage writes one message: a header line, its keys and properties, the verdict of
// the consumer pipeline (gate, then classification) and the payload, indented when it is
// JSON.
func printMessage(w io.Writer, msg apulsar.Message, raw bool) {
	fmt.Fprintf(w, "--- %s  %s  published %s  redelivery %d\n", msg.ID(), escape(msg.Topic()),
		msg.PublishTime().UTC().Format(time.RFC3339Nano), msg.RedeliveryCount())
	printBody(w, body{
		key: msg.Key(), orderingKey: msg.OrderingKey(), props: msg.Properties(),
		payload: msg.Payload(), note: "verdict: " + verdict(msg), raw: raw,
	})
}

// body is what printBody shows of a message.
type body struct {
	key, orderingKey string
	props            map[string]string
	payload          []byte
	note             string
	raw              bool // payload bytes as they are
}

// printBody writes the key and ordering key (when set), the sorted properties, a note line
// and the payload: pretty-printed when it is JSON and quoted otherwise, escaped either way
// unless raw. Every value is escaped (see escape).
func printBody(w io.Writer, m body) {
	if m.key != "" {
		fmt.Fprintf(w, "  key: %s\n", escape(m.key))
	}
	if m.orderingKey != "" {
		fmt.Fprintf(w, "  ordering key: %s\n", escape(m.orderingKey))
	}
	keys := make([]string, 0, len(m.props))
	for k := range m.props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", escape(k), escape(m.props[k]))
	}
	fmt.Fprintf(w, "  %s\n", escape(m.note))
	if m.raw {
		_, _ = io.WriteString(w, "  ")
		_, _ = w.Write(m.payload)
		_, _ = io.WriteString(w, "\n")
		return
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, m.payload, "  ", "  "); err == nil {
		fmt.Fprintf(w, "  %s\n", escapeBytes(pretty.Bytes()))
		return
	}
	fmt.Fprintf(w, "  %q\n", m.payload)
}

// verdict applies the consumer's pre-dispatch rules to a message.
func verdict(msg apulsar.Message) string {
	props := msg.Properties()
	sv, present := props[bqpulsar.PropSchemaVersion]
	if err := bqpulsar.GateVerdict(sv, present); err != nil {
		return "rejected by the gate: " + err.Error()
	}
	env, err := envelope.Classify(msg.Payload())
	if err != nil {
		return err.Error()
	}
	ap, apPresent := props[bqpulsar.PropAttempts]
	reconciled, _ := bqpulsar.Reconcile(ap, apPresent, env.Attempts, msg.RedeliveryCount())
	s := fmt.Sprintf("accepted %s, attempts %d", env.URN(), reconciled)
	if job, ok := binding.RoutedJob(props); ok && job != env.URN() {
		s += ", routed to " + job + " by its bq-job property"
	}
	if env.DeadLetter != nil {
		s += fmt.Sprintf(", dead-lettered (%s) from %s after %d attempts", env.DeadLetter.Reason,
			env.DeadLetter.OriginalQueue, env.DeadLetter.Attempts)
	}
	return s
}
