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
//	dlq          list, peek, count (stats), redrive and purge dead letters
//	subscription create a durable subscription, so the broker keeps what is written
//	broker       run the embedded Pulsar-protocol broker for local development
//	version      print the versions of bq and of the Pulsar client
//
// Run `bq <command> -h` for the flags of a command. Errors are printed as one line on
// standard error. Exit status: 0 success, 1 the command failed, 2 it was called wrongly (an
// unknown flag or command, a bad flag value), 130 interrupted (SIGINT or SIGTERM; a second
// signal ends bq at once).
//
// The connection settings come from flags or, when a flag is not given, from PULSAR_URL,
// PULSAR_AUTH_TOKEN, PULSAR_AUTH_TOKEN_FILE, PULSAR_TLS_TRUST_CERTS_FILE and
// PULSAR_TLS_ALLOW_INSECURE_CONNECTION; the admin calls of `bq dlq` go through the proxy
// that HTTPS_PROXY or HTTP_PROXY names (http, https or socks5; not for NO_PROXY and loopback
// hosts), as net/http reads them. Values that come from messages are printed with
// terminal control characters escaped; --raw prints payload bytes as they are.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFail        = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT, as shells report it
)

// interruptGrace is how long a command may take to stop after a signal before bq exits
// without it.
const interruptGrace = 500 * time.Millisecond

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	done := make(chan int, 1)
	go func() { done <- run(ctx, os.Args[1:], os.Stdout, os.Stderr) }()
	var code int
	select {
	case code = <-done:
	case <-ctx.Done():
		stop() // a second signal ends the process at once
		select {
		case code = <-done:
		case <-time.After(interruptGrace):
			fmt.Fprintln(os.Stderr, "bq: interrupted")
			code = exitInterrupted
		}
	}
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
	dlq          list, peek, count (stats), redrive and purge dead letters
	subscription create a durable subscription, so the broker keeps what is written
	broker       run the embedded Pulsar-protocol broker for local development
	version      print the versions of bq and of the Pulsar client

Run "bq <command> --help" for the flags of a command.

Exit status: 0 success, 1 failed, 2 called wrongly, 130 interrupted.
`

// run dispatches to a command and returns the process exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var code int
	switch args[0] {
	case "conformance":
		code = runConformance(ctx, args[1:], stdout, stderr)
	case "publish":
		code = runPublish(ctx, args[1:], stdout, stderr)
	case "tail":
		code = runTail(ctx, args[1:], stdout, stderr)
	case "dlq":
		code = runDLQ(ctx, args[1:], stdout, stderr)
	case "subscription":
		code = runSubscription(ctx, args[1:], stdout, stderr)
	case "broker":
		code = runBroker(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		code = runVersion(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		if strings.HasPrefix(args[0], "-") {
			return usageLine(stderr, "bq", "unknown flag %s; see `bq --help`", args[0])
		}
		return usageLine(stderr, "bq", "unknown command %q; see `bq --help`", args[0])
	}
	if code == exitFail && ctx.Err() != nil {
		code = exitInterrupted
	}
	return code
}

// clientModule is the module path of the Pulsar client whose version bq reports.
const clientModule = "github.com/apache/pulsar-client-go"

// runVersion implements `bq version`.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		return usageLine(stderr, "bq version", "unexpected argument %q; see `bq --help`", args[0])
	}
	info, ok := debug.ReadBuildInfo()
	fmt.Fprint(stdout, versionText(info, ok))
	return exitOK
}

// versionText renders the module version, the client's version and the Go version; a
// version the build does not record is "(devel)".
func versionText(info *debug.BuildInfo, ok bool) string {
	const devel = "(devel)"
	path, mod, client := "github.com/babelqueue/babelqueue-go-pulsar", devel, devel
	if ok && info != nil {
		if info.Main.Path != "" {
			path = info.Main.Path
		}
		if v := info.Main.Version; v != "" {
			mod = v
		}
		for _, d := range info.Deps {
			if d.Path != clientModule {
				continue
			}
			if d.Replace != nil {
				d = d.Replace
			}
			if d.Version != "" {
				client = d.Version
			}
		}
	}
	return fmt.Sprintf("bq %s %s\npulsar-client-go %s\n%s\n", path, mod, client, runtime.Version())
}
