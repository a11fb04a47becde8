package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

const dlqUsage = `Usage: bq dlq <list|peek|stats|redrive|purge> --topic DLQ-TOPIC [flags]

Inspects, redrives and purges the dead letters of a queue ("<queue>.dlq"), as they stand on
its retention subscription (--subscription, default bq-dlq): the durable subscription a
consumer creates before its first dead letter, so that the broker keeps them.

	list     one line per pending dead letter: kind, reason, URN, attempts, original queue, error
	peek     the pending dead letters in full (properties and pretty-printed payload)
	stats    the pending dead letters at a glance: counts by URN and reason with a bar
	         chart, and the ages of the oldest and the newest (their dead_letter.failed_at,
	         else their publish time); --json prints the same as one JSON document
	redrive  move annotated messages back to their queue (dead_letter block removed,
	         attempts reset to 0, bq-job kept, everything else byte for byte) and
	         acknowledge each on the subscription once it is republished; poison and raw
	         copies are reported and left in place; when stderr is a terminal, a
	         progress bar there shows the rate and the time left
	purge    acknowledge dead letters on the subscription without republishing them (--yes)

list, peek, stats and redrive --dry-run are strictly read-only: they read through the admin API
(--admin-url) and create, acknowledge and redeliver nothing. Dead letters already redriven
or purged are not shown.

Examples:

	bq dlq list --topic orders.dlq --admin-url http://localhost:8080
	bq dlq stats --topic orders.dlq --json
	bq dlq redrive --topic orders.dlq --urn urn:babel:orders:created --dry-run
	bq dlq purge --topic orders.dlq --reason poison --yes
`

// Admin API settings, read when the flag is not given.
const (
	envAdminURL     = "PULSAR_ADMIN_URL"
	defaultAdminURL = "http://127.0.0.1:8080"
)

// runDLQ implements `bq dlq`.
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, dlqUsage)
		return exitUsage
	}
	switch args[0] {
	case "list", "peek":
		return runDLQRead(ctx, args[0], args[1:], stdout, stderr)
	case "stats":
		return runDLQStats(ctx, args[1:], stdout, stderr)
	case "redrive":
		return runDLQRedrive(ctx, args[1:], stdout, stderr)
	case "purge":
		return runDLQPurge(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, dlqUsage)
		return exitOK
	default:
		return usageLine(stderr, "bq dlq", "unknown subcommand %q (list, peek, stats, redrive or purge); see `bq dlq --help`", args[0])
	}
}

// adminFlags is the admin API endpoint of the read-only commands.
type adminFlags struct {
	fs  *flag.FlagSet
	url string
	tr  *http.Transport // the admin client's, once made
}

// close closes the admin client's idle keep-alive connections: the broker would keep them
// open after the command, each with two goroutines of the process that ran it.
func (a *adminFlags) close() {
	if a.tr != nil {
		a.tr.CloseIdleConnections()
	}
}

func (a *adminFlags) register(fs *flag.FlagSet) {
	a.fs = fs
	fs.StringVar(&a.url, "admin-url", "", "Pulsar admin (web service) `URL` for read-only inspection (default: env "+
		envAdminURL+", else "+defaultAdminURL+")")
}

// admin returns the admin API client, with the token and TLS settings of conn.
func (a *adminFlags) admin(conn *connFlags) (*dlq.Admin, error) {
	s, err := conn.settled()
	if err != nil {
		return nil, err
	}
	u := a.url
	set := false
	a.fs.Visit(func(f *flag.Flag) { set = set || f.Name == "admin-url" })
	if !set {
		if u = os.Getenv(envAdminURL); u == "" {
			u = defaultAdminURL
		}
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.allowInsecure} //nolint:gosec // only with --tls-allow-insecure
	if s.trustCerts != "" {
		pem, err := os.ReadFile(s.trustCerts)
		if err != nil {
			return nil, usagef("--tls-trust-certs: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--tls-trust-certs %s: no PEM certificate", s.trustCerts)
		}
		tlsCfg.RootCAs = pool
	}
	a.tr = &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment}
	hc := &http.Client{Timeout: s.timeout, Transport: a.tr}
	opts := []dlq.AdminOption{dlq.WithHTTPClient(hc)}
	if s.token != "" {
		opts = append(opts, dlq.WithAdminToken(s.token))
	}
	ad, err := dlq.NewAdmin(u, opts...)
	if err != nil {
		return nil, usageError{err}
	}
	return ad, nil
}

func subscriptionFlag(fs *flag.FlagSet) *string {
	return fs.String("subscription", dlq.DefaultSubscription, "the retention `subscription` of the dead-letter topic")
}

// checkTopicAndSub validates the --topic and --subscription flags.
func checkTopicAndSub(topic, sub string) error {
	if topic == "" {
		return usagef("--topic is required")
	}
	if err := dlq.ValidateTopic(topic); err != nil {
		return usagef("--topic: %v", err)
	}
	if err := dlq.ValidateSubscriptionName(sub); err != nil {
		return usagef("--subscription: %v", err)
	}
	return nil
}

func runDLQRead(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	name := "bq dlq " + sub
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conn connFlags
	conn.register(fs)
	var adm adminFlags
	adm.register(fs)
	defer adm.close()
	topic := fs.String("topic", "", "the dead-letter `topic`, e.g. orders.dlq (required)")
	subscription := subscriptionFlag(fs)
	limit := newIntFlag(fs, "n", dlq.DefaultPeekLimit, 1, "show at most this many messages")
	_ = newDurationFlag(fs, "wait", 0, false, "ignored: list and peek end at the last pending message (kept for scripts)")
	raw := fs.Bool("raw", false, "peek: print each payload's bytes as they are, control characters included (default: escaped)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if err := checkTopicAndSub(*topic, *subscription); err != nil {
		return failLine(stderr, name, err)
	}
	admin, err := adm.admin(&conn)
	if err != nil {
		return failLine(stderr, name, err)
	}
	msgs, err := dlq.Peek(ctx, admin, dlq.PeekOptions{Topic: *topic, Subscription: *subscription, Limit: *limit})
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

// summarize is the one-line description of a dead-letter message. urn is the routing URN
// (the one a redrive keeps and filters on); body_urn follows when the envelope says another.
func summarize(m dlq.Message) string {
	s := fmt.Sprintf("%s  %-9s", m.ID, m.Kind)
	if m.Envelope == nil || m.Envelope.DeadLetter == nil {
		return s + "  (no dead_letter block: a gate rejection or a foreign message)"
	}
	dl := m.Envelope.DeadLetter
	urn := m.RoutingURN
	if urn == "" {
		urn = "-"
	}
	s += fmt.Sprintf("  reason=%s urn=%s", escape(string(dl.Reason)), escape(urn))
	if m.URN != "" && m.URN != m.RoutingURN {
		s += " body_urn=" + escape(m.URN)
	}
	s += fmt.Sprintf(" attempts=%d original_queue=%s failed_at=%s",
		dl.Attempts, escape(dl.OriginalQueue), time.UnixMilli(dl.FailedAt).UTC().Format(time.RFC3339))
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
	var adm adminFlags
	adm.register(fs)
	defer adm.close()
	topic := fs.String("topic", "", "the dead-letter `topic` to move messages from (required)")
	target := fs.String("target", "", "the `topic` to move them to (default: --topic without .dlq)")
	urn := fs.String("urn", "", "move only messages routed by this `URN` (their bq-job, else the body's URN)")
	reason := newEnumFlag(fs, "reason", "", []string{string(envelope.ReasonFailed), string(envelope.ReasonUnknownURN)},
		"move only messages dead-lettered for this `reason`; poison copies are never moved")
	limit := newIntFlag(fs, "n", 0, 0, "move at most this many messages (0: all)")
	dryRun := fs.Bool("dry-run", false, "report what would move through the admin API; change nothing")
	subscription := subscriptionFlag(fs)
	idle := newDurationFlag(fs, "wait", dlq.DefaultIdleTimeout, false, "stop when no message arrived for this long")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if err := checkTopicAndSub(*topic, *subscription); err != nil {
		return failLine(stderr, name, err)
	}
	if *target != "" {
		if err := dlq.ValidateTopic(*target); err != nil {
			return failLine(stderr, name, usagef("--target: %v", err))
		}
	}
	opts := dlq.RedriveOptions{
		Topic: *topic, Target: *target, Subscription: *subscription, URN: *urn,
		Reason: envelope.Reason(*reason), Limit: *limit, DryRun: *dryRun, IdleTimeout: *idle,
	}
	var report dlq.RedriveReport
	var err error
	if *dryRun {
		if opts.Admin, err = adm.admin(&conn); err != nil {
			return failLine(stderr, name, err)
		}
		bar := redriveProgress(ctx, stderr, opts.Admin, &opts)
		report, err = dlq.Redrive(ctx, nil, opts)
		bar.done()
	} else {
		client, cerr := conn.connect(ctx, stderr)
		if cerr != nil {
			return failLine(stderr, name, cerr)
		}
		defer client.Close()
		var admin *dlq.Admin
		if isTerminal(stderr) {
			admin, _ = adm.admin(&conn) // only for the bar's total: without it, a spinner
		}
		bar := redriveProgress(ctx, stderr, admin, &opts)
		report, err = dlq.Redrive(ctx, client, opts)
		bar.done()
	}
	if errors.Is(err, dlq.ErrInvalidOptions) {
		return failLine(stderr, name, usageError{err})
	}
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

// backlogTimeout bounds the admin API call that gives redrive's progress bar its total.
const backlogTimeout = 5 * time.Second

// redriveProgress returns the progress bar of a redrive when stderr is a terminal (nil
// otherwise) and makes opts count each message the run reads on it. The total is the backlog
// of the subscription, when admin is not nil and answers within backlogTimeout: the entries
// the run may read, a batch counting once, so the bar goes past it for batched dead letters;
// otherwise the bar is an indeterminate spinner.
func redriveProgress(ctx context.Context, stderr io.Writer, admin *dlq.Admin, opts *dlq.RedriveOptions) *progress {
	if !isTerminal(stderr) {
		return nil
	}
	var total int64
	if admin != nil {
		bctx, cancel := context.WithTimeout(ctx, backlogTimeout)
		if n, err := admin.Backlog(bctx, opts.Topic, opts.Subscription); err == nil {
			total = n
		}
		cancel()
	}
	verb := "redrive"
	if opts.DryRun {
		verb = "redrive --dry-run"
	}
	bar := newProgress(stderr, verb, total)
	opts.Progress = func(dlq.Message, bool) { bar.step() }
	return bar
}

func runDLQPurge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "bq dlq purge"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conn connFlags
	conn.register(fs)
	topic := fs.String("topic", "", "the dead-letter `topic` (required)")
	urn := fs.String("urn", "", "purge only messages routed by this `URN`")
	reason := newEnumFlag(fs, "reason", "", []string{
		string(envelope.ReasonFailed), string(envelope.ReasonUnknownURN), string(envelope.ReasonPoison),
	}, "purge only messages dead-lettered for this `reason`")
	limit := newIntFlag(fs, "n", 0, 0, "purge at most this many messages (0: all)")
	subscription := subscriptionFlag(fs)
	yes := fs.Bool("yes", false, "confirm: acknowledge the matching dead letters for good (see them first with `bq dlq list`)")
	idle := newDurationFlag(fs, "wait", dlq.DefaultIdleTimeout, false, "stop when no message arrived for this long")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if err := checkTopicAndSub(*topic, *subscription); err != nil {
		return failLine(stderr, name, err)
	}
	if !*yes {
		return usageLine(stderr, name, "purging discards dead letters for good; add --yes to confirm (see them first with `bq dlq list`)")
	}
	client, err := conn.connect(ctx, stderr)
	if err != nil {
		return failLine(stderr, name, err)
	}
	defer client.Close()
	report, err := dlq.Purge(ctx, client, dlq.PurgeOptions{
		Topic: *topic, Subscription: *subscription, URN: *urn, Reason: envelope.Reason(*reason),
		Limit: *limit, IdleTimeout: *idle,
	})
	for _, m := range report.Purged {
		fmt.Fprintf(stdout, "purged %s\n", summarize(m))
	}
	fmt.Fprintf(stdout, "purged %d, skipped %d (filters)\n", len(report.Purged), report.Skipped)
	if err != nil {
		return failLine(stderr, name, err)
	}
	return exitOK
}
