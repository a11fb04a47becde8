package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

const dlqUsage = `Usage: bq dlq <list|peek|redrive> --topic DLQ-TOPIC [flags]

Inspects and redrives a dead-letter topic ("<queue>.dlq").

	list     one line per message: kind, reason, URN, attempts, original queue, error
	peek     the messages in full (properties and pretty-printed payload)
	redrive  move annotated messages back to their queue (dead_letter block removed,
	         attempts reset to 0, everything else kept byte for byte); poison and raw
	         copies are reported and left in place

list and peek read with a non-durable reader: nothing is consumed.

Examples:

	bq dlq list --topic orders.dlq
	bq dlq redrive --topic orders.dlq --urn urn:babel:orders:created --dry-run
`

// runDLQ implements `bq dlq`.
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, dlqUsage)
		return exitUsage
	}
	switch args[0] {
	case "list", "peek":
		return runDLQRead(ctx, args[0], args[1:], stdout, stderr)
	case "redrive":
		return runDLQRedrive(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, dlqUsage)
		return exitOK
	default:
		return usageLine(stderr, "bq dlq", "unknown subcommand %q (list, peek or redrive); see `bq dlq --help`", args[0])
	}
}

func runDLQRead(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	name := "bq dlq " + sub
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conn connFlags
	conn.register(fs)
	topic := fs.String("topic", "", "the dead-letter `topic`, e.g. orders.dlq (required)")
	limit := newIntFlag(fs, "n", dlq.DefaultPeekLimit, 1, "read at most this many messages")
	idle := newDurationFlag(fs, "wait", dlq.DefaultIdleTimeout, false, "stop when no message arrived for this long")
	raw := fs.Bool("raw", false, "peek: print each payload's bytes as they are, control characters included (default: escaped)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *topic == "" {
		return usageLine(stderr, name, "--topic is required")
	}
	client, err := conn.connect(ctx, stderr)
	if err != nil {
		return failLine(stderr, name, err)
	}
	defer client.Close()
	msgs, err := dlq.Peek(ctx, client, dlq.PeekOptions{Topic: *topic, Limit: *limit, IdleTimeout: *idle})
	if err != nil {
		return failLine(stderr, name, err)
	}
	for _, m := range msgs {
		if sub == "list" {
			fmt.Fprintln(stdout, summarize(m))
			continue
		}
		fmt.Fprintf(stdout, "--- %s  %s  %s\n", m.ID, m.Kind, m.PublishTime.UTC().Format(time.RFC3339Nano))
		printBody(stdout, body{
			key: m.Key, orderingKey: m.OrderingKey, props: m.Properties, payload: m.Payload,
			note: summarize(m), raw: *raw,
		})
	}
	fmt.Fprintf(stdout, "%d message(s)\n", len(msgs))
	return exitOK
}

// summarize is the one-line description of a dead-letter message.
func summarize(m dlq.Message) string {
	s := fmt.Sprintf("%s  %-9s", m.ID, m.Kind)
	if m.Envelope == nil || m.Envelope.DeadLetter == nil {
		return s + "  (no dead_letter block: a gate rejection or a foreign message)"
	}
	dl := m.Envelope.DeadLetter
	urn := m.URN
	if urn == "" {
		urn = "-"
	}
	s += fmt.Sprintf("  reason=%s urn=%s attempts=%d original_queue=%s failed_at=%s",
		escape(string(dl.Reason)), escape(urn), dl.Attempts, escape(dl.OriginalQueue),
		time.UnixMilli(dl.FailedAt).UTC().Format(time.RFC3339))
	if dl.Error != nil {
		s += fmt.Sprintf(" error=%q", *dl.Error)
	}
	return s
}

func runDLQRedrive(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "bq dlq redrive"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conn connFlags
	conn.register(fs)
	topic := fs.String("topic", "", "the dead-letter `topic` to move messages from (required)")
	target := fs.String("target", "", "the `topic` to move them to (default: --topic without .dlq)")
	urn := fs.String("urn", "", "move only messages with this `URN`")
	reason := newEnumFlag(fs, "reason", "", []string{string(envelope.ReasonFailed), string(envelope.ReasonUnknownURN)},
		"move only messages dead-lettered for this `reason`; poison copies are never moved")
	limit := newIntFlag(fs, "n", 0, 0, "move at most this many messages (0: all)")
	dryRun := fs.Bool("dry-run", false, "report what would move; publish and acknowledge nothing")
	sub := fs.String("subscription", dlq.DefaultRedriveSubscription, "durable `subscription` used to read the dead-letter topic")
	idle := newDurationFlag(fs, "wait", dlq.DefaultIdleTimeout, false, "stop when no message arrived for this long")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *topic == "" {
		return usageLine(stderr, name, "--topic is required")
	}
	client, err := conn.connect(ctx, stderr)
	if err != nil {
		return failLine(stderr, name, err)
	}
	defer client.Close()
	report, err := dlq.Redrive(ctx, client, dlq.RedriveOptions{
		Topic: *topic, Target: *target, Subscription: *sub, URN: *urn,
		Reason: envelope.Reason(*reason), Limit: *limit, DryRun: *dryRun, IdleTimeout: *idle,
	})
	verb := "moved"
	if *dryRun {
		verb = "would move"
	}
	for _, m := range report.Moved {
		fmt.Fprintf(stdout, "%s %s\n", verb, summarize(m))
	}
	for _, m := range report.Poison {
		fmt.Fprintf(stdout, "left (poison, never republished) %s\n", summarize(m))
	}
	for _, m := range report.Raw {
		fmt.Fprintf(stdout, "left (raw copy) %s\n", summarize(m))
	}
	fmt.Fprintf(stdout, "%s %d, skipped %d (filters), poison %d, raw %d\n",
		verb, len(report.Moved), report.Skipped, len(report.Poison), len(report.Raw))
	if err != nil {
		return failLine(stderr, name, err)
	}
	return exitOK
}
