package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// partitionedFlag collects repeated -partitioned name=N flags.
type partitionedFlag map[string]int

func (p partitionedFlag) String() string {
	parts := make([]string, 0, len(p))
	for n, c := range p {
		parts = append(parts, n+"="+strconv.Itoa(c))
	}
	return strings.Join(parts, ",")
}

func (p partitionedFlag) Set(v string) error {
	name, count, ok := strings.Cut(v, "=")
	n, err := strconv.Atoi(count)
	if !ok || name == "" || err != nil || n < 1 {
		return fmt.Errorf("want name=N with N >= 1, got %q", v)
	}
	p[name] = n
	return nil
}

// runBroker implements `bq broker`: the embedded broker serving until ctx ends (SIGINT or SIGTERM).
func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bq broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:6650", "listen `host:port`; the service URL advertises exactly this host")
	parts := partitionedFlag{}
	fs.Var(parts, "partitioned", "create a partitioned topic, `name=N` (repeatable)")
	maxSize := fs.Int("max-message-size", 5*1024*1024, "max_message_size announced to clients, in `bytes` (small values force chunking)")
	realistic := fs.Bool("realistic-timing", false, "use a real broker's 1 s delayed-delivery tick")
	entryMeta := fs.Bool("entry-metadata", false, "send broker entry metadata (broker timestamp, index) with every message")
	redeliver := fs.Bool("redelivery-on-disconnect", false, "count a redelivery when a Shared consumer leaves (Pulsar 2.x behaviour)")
	adminAddr := fs.String("admin-addr", "", "also serve the admin REST subset (topics, partitioned topics) on `host:port`")
	batchAck := fs.Bool("batch-index-ack", false, "honour batch-index acknowledgements")
	ksSelector := fs.String("key-shared-selector", "consistent-hashing",
		"how Key_Shared (AUTO_SPLIT) maps key hashes to consumers: `consistent-hashing` (Pulsar's default) or auto-split")
	allowRemote := fs.Bool("allow-remote", false, "allow a non-loopback -addr (there is no authentication)")
	verbose := fs.Bool("v", false, "trace every command in and out on standard error")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bq broker [flags]

Runs the embedded Pulsar-protocol broker (package pulsartest) until interrupted. It keeps
everything in memory. The service URL is printed on standard output; connections are logged
on standard error.

Example:

	bq broker --addr 127.0.0.1:6650 --partitioned orders=3 -v

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bq broker: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		fmt.Fprintf(stderr, "bq broker: -addr %q: %v\n", *addr, err)
		return exitUsage
	}
	if !*allowRemote && !isLoopback(host) {
		fmt.Fprintf(stderr, "bq broker: -addr %q is not a loopback address; add -allow-remote to serve it (no authentication)\n", *addr)
		return exitUsage
	}
	var selector pulsartest.KeySharedSelector
	switch *ksSelector {
	case "consistent-hashing":
		selector = pulsartest.ConsistentHashing
	case "auto-split":
		selector = pulsartest.AutoSplitHashRange
	default:
		fmt.Fprintf(stderr, "bq broker: -key-shared-selector %q: want consistent-hashing or auto-split\n", *ksSelector)
		return exitUsage
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	opts := []pulsartest.Option{
		pulsartest.WithAddr(*addr),
		pulsartest.WithLogger(logger),
		pulsartest.WithMaxMessageSize(*maxSize),
		pulsartest.WithRealisticTiming(*realistic),
		pulsartest.WithBrokerEntryMetadata(*entryMeta),
		pulsartest.WithRedeliveryOnDisconnect(*redeliver),
		pulsartest.WithBatchIndexAck(*batchAck),
		pulsartest.WithKeySharedSelector(selector),
	}
	if *adminAddr != "" {
		ahost, _, err := net.SplitHostPort(*adminAddr)
		if err != nil {
			fmt.Fprintf(stderr, "bq broker: -admin-addr %q: %v\n", *adminAddr, err)
			return exitUsage
		}
		if !*allowRemote && !isLoopback(ahost) {
			fmt.Fprintf(stderr, "bq broker: -admin-addr %q is not a loopback address; add -allow-remote to serve it\n", *adminAddr)
			return exitUsage
		}
		opts = append(opts, pulsartest.WithAdminHTTP(*adminAddr))
	}
	b, err := pulsartest.Start(ctx, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "bq broker: %v\n", err)
		return exitFail
	}
	for name, n := range parts {
		if err := b.CreatePartitionedTopic(name, n); err != nil {
			_ = b.Close()
			fmt.Fprintf(stderr, "bq broker: %v\n", err)
			return exitFail
		}
	}
	fmt.Fprintln(stdout, b.URL())
	if u := b.AdminURL(); u != "" {
		logger.Info("bq broker: admin REST subset", "url", u)
	}
	<-ctx.Done()
	if err := b.Close(); err != nil {
		fmt.Fprintf(stderr, "bq broker: %v\n", err)
		return exitFail
	}
	return exitOK
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
