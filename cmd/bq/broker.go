package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

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
	txns := fs.Bool("transactions", false, "run the transaction coordinator (Pulsar's transactionCoordinatorEnabled=true)")
	ksSelector := fs.String("key-shared-selector", "consistent-hashing",
		"how Key_Shared (AUTO_SPLIT) maps key hashes to consumers: `consistent-hashing` (Pulsar's default) or auto-split")
	allowRemote := fs.Bool("allow-remote", false, "allow a non-loopback -addr (there is no authentication)")
	verbose := fs.Bool("v", false, "trace every command in and out on standard error")
	quotaCheck := fs.Duration("backlog-quota-check-interval", time.Minute, "how often backlog quotas are enforced (Pulsar's backlogQuotaCheckIntervalInSeconds)")
	trimEvery := fs.Duration("trim-interval", 0, "drop, this often, the entries no durable subscription still needs, as Pulsar trims its ledgers (0: keep every entry until exit)")
	var sec securityFlags
	sec.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bq broker [flags]

Runs the embedded Pulsar-protocol broker (package pulsartest) until interrupted. It keeps
everything in memory, every entry until it exits unless -trim-interval is set. The service
URL is printed on standard output; connections are logged on standard error.

Example:

	bq broker --addr 127.0.0.1:6650 --partitioned orders=3 -v

Flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *trimEvery < 0 {
		fmt.Fprintf(stderr, "bq broker: -trim-interval %v: want 0 (off) or a positive duration\n", *trimEvery)
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
		pulsartest.WithBacklogQuotaCheck(*quotaCheck),
		pulsartest.WithTrimInterval(*trimEvery),
	}
	if *txns {
		opts = append(opts, pulsartest.WithTransactions())
	}
	secOpts, err := sec.options()
	if err != nil {
		fmt.Fprintf(stderr, "bq broker: %v\n", err)
		return exitUsage
	}
	opts = append(opts, secOpts...)
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
	if u := b.TLSURL(); u != "" {
		fmt.Fprintln(stdout, u)
	}
	if u := b.AdminTLSURL(); u != "" {
		logger.Info("bq broker: admin REST subset over HTTPS", "url", u)
	}
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

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// securityFlags are the TLS and authentication flags of `bq broker`.
type securityFlags struct {
	tlsAddr, adminTLSAddr      string
	certFile, keyFile, caFile  string
	tokenSecretFile, anonymous string
	authTLS                    bool
	basic, superUsers, grants  listFlag
}

func (s *securityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.tlsAddr, "tls-addr", "", "also serve pulsar+ssl:// on `host:port` (needs -tls-cert-file and -tls-key-file)")
	fs.StringVar(&s.adminTLSAddr, "admin-tls-addr", "", "also serve the admin REST subset over HTTPS on `host:port`")
	fs.StringVar(&s.certFile, "tls-cert-file", "", "broker certificate (PEM `file`) of the TLS listeners")
	fs.StringVar(&s.keyFile, "tls-key-file", "", "private key (PEM `file`) of the broker certificate")
	fs.StringVar(&s.caFile, "tls-trust-certs-file", "", "CA certificates (PEM `file`) that verify client certificates")
	fs.BoolVar(&s.authTLS, "auth-tls", false, "authenticate clients by their certificate (principal: the common name)")
	fs.StringVar(&s.tokenSecretFile, "auth-token-secret-file", "", "HMAC-SHA256 key (`file`, raw bytes) that verifies JWT tokens")
	fs.Var(&s.basic, "auth-basic", "accept basic authentication for `user:password` (repeatable)")
	fs.StringVar(&s.anonymous, "anonymous-role", "", "`role` of clients without credentials (with authentication on; empty refuses them)")
	fs.Var(&s.superUsers, "super-user", "`role` that may use every namespace (repeatable)")
	fs.Var(&s.grants, "grant", "restrict a namespace to roles, `tenant/ns=role[,role…]` (repeatable)")
}

var errSecurityFlags = errors.New("invalid security flags")

// options turns the flags into broker options.
func (s *securityFlags) options() ([]pulsartest.Option, error) {
	var opts []pulsartest.Option
	if s.tlsAddr != "" || s.adminTLSAddr != "" {
		if s.certFile == "" || s.keyFile == "" {
			return nil, fmt.Errorf("%w: -tls-addr and -admin-tls-addr need -tls-cert-file and -tls-key-file", errSecurityFlags)
		}
		cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: broker certificate: %w", errSecurityFlags, err)
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if s.caFile != "" {
			pem, err := os.ReadFile(s.caFile)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", errSecurityFlags, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: no certificate in %s", errSecurityFlags, s.caFile)
			}
			cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
		}
		if s.tlsAddr != "" {
			opts = append(opts, pulsartest.WithTLS(s.tlsAddr, cfg))
		}
		if s.adminTLSAddr != "" {
			opts = append(opts, pulsartest.WithAdminTLS(s.adminTLSAddr, cfg))
		}
	}
	if !s.authTLS && s.tokenSecretFile == "" && len(s.basic) == 0 {
		if s.anonymous != "" || len(s.superUsers) > 0 || len(s.grants) > 0 {
			return nil, fmt.Errorf("%w: -anonymous-role, -super-user and -grant need an authentication flag", errSecurityFlags)
		}
		return opts, nil
	}
	a := pulsartest.Auth{TLS: s.authTLS, Anonymous: s.anonymous, SuperUsers: s.superUsers, Basic: map[string]string{}, Grants: map[string][]string{}}
	if s.tokenSecretFile != "" {
		key, err := os.ReadFile(s.tokenSecretFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errSecurityFlags, err)
		}
		a.TokenSecret = key
	}
	for _, up := range s.basic {
		user, pass, ok := strings.Cut(up, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("%w: -auth-basic %q: want user:password", errSecurityFlags, up)
		}
		a.Basic[user] = pass
	}
	for _, g := range s.grants {
		ns, roles, ok := strings.Cut(g, "=")
		if !ok || strings.Count(ns, "/") != 1 || roles == "" {
			return nil, fmt.Errorf("%w: -grant %q: want tenant/ns=role[,role…]", errSecurityFlags, g)
		}
		a.Grants[ns] = append(a.Grants[ns], strings.Split(roles, ",")...)
	}
	return append(opts, pulsartest.WithAuth(a)), nil
}
