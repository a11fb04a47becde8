// Command bq is the BabelQueue Pulsar command-line tool.
//
// Usage:
//
//	bq <command> [flags]
//
// Commands:
//
//	conformance  run a BabelQueue conformance suite against this SDK
//	publish      publish a BabelQueue envelope
//	tail         print the messages of a topic with the consumer's verdict
//	dlq          list, peek and redrive dead-letter topics
//	broker       run the embedded Pulsar-protocol broker for local development
//
// Run `bq <command> -h` for the flags of a command. Errors are printed as one line on
// standard error, and the exit status is non-zero: 1 when the command failed, 2 when it was
// called wrongly.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `bq is the BabelQueue Pulsar command-line tool.

Usage:

	bq <command> [flags]

Commands:

	conformance  run a BabelQueue conformance suite against this SDK
	publish      publish a BabelQueue envelope
	tail         print the messages of a topic with the consumer's verdict
	dlq          list, peek and redrive dead-letter topics
	broker       run the embedded Pulsar-protocol broker for local development

Run "bq <command> -h" for the flags of a command.
`

// run dispatches to a command and returns the process exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "conformance":
		return runConformance(ctx, args[1:], stdout, stderr)
	case "publish":
		return runPublish(ctx, args[1:], stdout, stderr)
	case "tail":
		return runTail(ctx, args[1:], stdout, stderr)
	case "dlq":
		return runDLQ(ctx, args[1:], stdout, stderr)
	case "broker":
		return runBroker(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "bq: unknown command %q (run \"bq help\")\n", args[0])
		return exitUsage
	}
}
