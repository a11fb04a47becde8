package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
)

const subscriptionUsage = `Usage: bq subscription create --topic TOPIC --name NAME [flags]

Makes sure a durable subscription exists on a topic (on every partition of a partitioned
topic), created at the earliest message, so that the broker keeps every message written to
the topic from then on until that subscription acknowledges it. On a cluster without a
retention policy, messages written to a topic nobody subscribes to are deleted when the
broker trims its ledgers: provision the subscription of a queue before its publisher is
deployed, and the retention subscription (bq-dlq) of a dead-letter topic written by an older
consumer.

It attaches a consumer that asks for no message, then closes it: nothing is delivered,
acknowledged or redelivered, and an existing subscription keeps its position.

Examples:

	bq subscription create --topic orders --name orders-workers --type shared
	bq subscription create --topic orders.dlq --name bq-dlq
`

// subscriptionTypes maps the --type values onto the client's types.
var subscriptionTypes = map[string]apulsar.SubscriptionType{
	"exclusive": apulsar.Exclusive, "shared": apulsar.Shared, "failover": apulsar.Failover, "key_shared": apulsar.KeyShared,
}

// runSubscription implements `bq subscription`.
func runSubscription(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, subscriptionUsage)
		return exitUsage
	}
	switch args[0] {
	case "create":
		return runSubscriptionCreate(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, subscriptionUsage)
		return exitOK
	default:
		return usageLine(stderr, "bq subscription", "unknown subcommand %q (create); see `bq subscription --help`", args[0])
	}
}

func runSubscriptionCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "bq subscription create"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), subscriptionUsage+"\nFlags:\n")
		fs.PrintDefaults()
	}
	var conn connFlags
	conn.register(fs)
	topic := fs.String("topic", "", "the `topic` (required)")
	sub := fs.String("name", "", "the subscription `name` (required)")
	typ := newEnumFlag(fs, "type", "shared", []string{"shared", "exclusive", "failover", "key_shared"},
		"the `type` the subscription's consumers use (attaching with another type to an idle "+
			"subscription makes the broker drop its redelivery counts)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	switch {
	case *topic == "":
		return usageLine(stderr, name, "--topic is required")
	case *sub == "":
		return usageLine(stderr, name, "--name is required")
	}
	if err := dlq.ValidateTopic(*topic); err != nil {
		return failLine(stderr, name, usagef("--topic: %v", err))
	}
	if err := dlq.ValidateSubscriptionName(*sub); err != nil {
		return failLine(stderr, name, usagef("--name: %v", err))
	}
	client, err := conn.connect(ctx, stderr)
	if err != nil {
		return failLine(stderr, name, err)
	}
	defer client.Close()
	if err := dlq.EnsureSubscription(ctx, client, *topic, *sub, dlq.WithSubscriptionType(subscriptionTypes[*typ])); err != nil {
		return failLine(stderr, name, conn.wrap(err))
	}
	fmt.Fprintf(stdout, "subscription %s on %s: ready (durable, kept from the earliest message)\n", escape(*sub), escape(*topic))
	return exitOK
}
