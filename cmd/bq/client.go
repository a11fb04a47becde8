package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// Environment variables read for the connection when the matching flag is not given. They
// are read after the flags are parsed, never used as flag defaults, so that no help or
// usage text can show their values.
const (
	envURL           = "PULSAR_URL"
	envToken         = "PULSAR_AUTH_TOKEN"      //nolint:gosec // the name of a variable, not a credential
	envTokenFile     = "PULSAR_AUTH_TOKEN_FILE" //nolint:gosec // the name of a variable, not a credential
	envTrustCerts    = "PULSAR_TLS_TRUST_CERTS_FILE"
	envAllowInsecure = "PULSAR_TLS_ALLOW_INSECURE_CONNECTION"
	defaultURL       = "pulsar://127.0.0.1:6650"
	defaultTimeout   = 5 * time.Second
)

// connFlags are the connection settings shared by every command that talks to Pulsar.
type connFlags struct {
	fs            *flag.FlagSet
	url           string
	token         string
	tokenFile     string
	trustCerts    string
	allowInsecure bool
	timeout       time.Duration  // settled from timeoutp
	timeoutp      *time.Duration // the --timeout flag
	verbose       bool
}

// register adds the connection flags to fs. Their defaults are empty; the environment is
// read by connect, after parsing.
func (c *connFlags) register(fs *flag.FlagSet) {
	c.fs = fs
	fs.StringVar(&c.url, "url", "", "Pulsar service `URL` (default: env "+envURL+", else "+defaultURL+")")
	fs.StringVar(&c.token, "token", "", "authentication `token` (default: env "+envToken+
		"); other local users can see a flag, prefer --token-file")
	fs.StringVar(&c.tokenFile, "token-file", "", "read the authentication token from `file` (default: env "+envTokenFile+")")
	fs.StringVar(&c.trustCerts, "tls-trust-certs", "",
		"`file` of trusted CA certificates for pulsar+ssl:// (default: env "+envTrustCerts+")")
	fs.BoolVar(&c.allowInsecure, "tls-allow-insecure", false,
		"accept any TLS certificate (default: env "+envAllowInsecure+"=true)")
	timeout := newDurationFlag(fs, "timeout", defaultTimeout, true,
		"give up connecting after this `duration`; also bounds each broker request")
	fs.Var(fs.Lookup("timeout").Value, "connect-timeout", "alias of --timeout")
	c.timeoutp = timeout
	fs.BoolVar(&c.verbose, "v", false, "log the client's activity to standard error")
}

// settled returns the settings after the environment fills in what no flag set. A bad
// setting is a usageError. Secrets never appear in its errors.
func (c *connFlags) settled() (connFlags, error) {
	set := map[string]bool{}
	if c.fs != nil {
		c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	out := *c
	if c.timeoutp != nil {
		out.timeout = *c.timeoutp
	}
	if !set["url"] {
		out.url = os.Getenv(envURL)
		if out.url == "" {
			out.url = defaultURL
		}
	}
	if !set["tls-trust-certs"] {
		out.trustCerts = os.Getenv(envTrustCerts)
	}
	if !set["tls-allow-insecure"] {
		if v := os.Getenv(envAllowInsecure); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return out, usagef("%s=%q is not true or false", envAllowInsecure, v)
			}
			out.allowInsecure = b
		}
	}
	switch {
	case set["token"] && set["token-file"]:
		return out, usagef("--token and --token-file exclude each other")
	case set["token"]:
		if out.token == "" {
			return out, usagef("--token is empty")
		}
	case set["token-file"]:
		if out.tokenFile == "" {
			return out, usagef("--token-file is empty")
		}
	default:
		out.token = os.Getenv(envToken)
		if out.token == "" {
			out.tokenFile = os.Getenv(envTokenFile)
		}
	}
	if out.tokenFile != "" {
		b, err := os.ReadFile(out.tokenFile) //nolint:gosec // reading the file the user names is the point
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is named below
			}
			return out, usagef("token file %s: %v", out.tokenFile, err)
		}
		out.token = strings.TrimSpace(string(b))
		if out.token == "" {
			return out, usagef("token file %s is empty", out.tokenFile)
		}
	}
	return out, nil
}

// connect settles the settings and connects, failing within the timeout with one line
// that names the URL and the cause. Its logs go to stderr with -v and nowhere otherwise;
// never to the client's default global logger.
func (c *connFlags) connect(ctx context.Context, stderr io.Writer) (apulsar.Client, error) {
	s, err := c.settled()
	if err != nil {
		return nil, err
	}
	*c = s
	logger := zap.NewNop()
	if c.verbose {
		logger = zap.New(zapcore.NewCore(
			zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
			zapcore.AddSync(stderr), zapcore.DebugLevel))
	}
	opts := apulsar.ClientOptions{
		URL:                        c.url,
		ConnectionTimeout:          c.timeout,
		OperationTimeout:           c.timeout,
		TLSTrustCertsFilePath:      c.trustCerts,
		TLSAllowInsecureConnection: c.allowInsecure,
		Logger:                     bqpulsar.NewClientLogger(logger),
	}
	if c.token != "" {
		opts.Authentication = apulsar.NewAuthenticationToken(c.token)
	}
	cl, err := bqpulsar.Connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// wrap gives an error of a client call the URL and cause of a connection failure.
func (c *connFlags) wrap(err error) error { return seam.WrapConnectError(c.url, err) }

// await runs a blocking client call that takes no context and returns when it does or as
// soon as ctx ends (with ctx's error); an abandoned call finishes in the background.
func await[T any](ctx context.Context, call func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := call()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("gave up waiting: %w", ctx.Err())
	}
}

// headerFlags collects repeated -header key=value flags.
type headerFlags map[string]string

func (h headerFlags) String() string { return fmt.Sprint(map[string]string(h)) }

func (h headerFlags) Set(v string) error {
	for i := 0; i < len(v); i++ {
		if v[i] == '=' {
			if i == 0 {
				return errors.New("empty header name")
			}
			h[v[:i]] = v[i+1:]
			return nil
		}
	}
	return fmt.Errorf("header %q is not key=value", v)
}
