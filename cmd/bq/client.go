package main

import (
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

	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// Environment variables read for the connection when the matching flag is not given.
const (
	envURL           = "PULSAR_URL"
	envToken         = "PULSAR_AUTH_TOKEN" //nolint:gosec // the name of a variable, not a credential
	envTrustCerts    = "PULSAR_TLS_TRUST_CERTS_FILE"
	envAllowInsecure = "PULSAR_TLS_ALLOW_INSECURE_CONNECTION"
	defaultURL       = "pulsar://127.0.0.1:6650"
)

// connFlags are the connection settings shared by every command that talks to Pulsar.
type connFlags struct {
	url           string
	token         string
	trustCerts    string
	allowInsecure bool
	timeout       time.Duration
	verbose       bool
}

// register adds the connection flags to fs, with defaults taken from the environment.
func (c *connFlags) register(fs *flag.FlagSet) {
	url := os.Getenv(envURL)
	if url == "" {
		url = defaultURL
	}
	insecure, _ := strconv.ParseBool(os.Getenv(envAllowInsecure))
	fs.StringVar(&c.url, "url", url, "Pulsar service `URL` (env "+envURL+")")
	fs.StringVar(&c.token, "token", os.Getenv(envToken), "authentication `token` (env "+envToken+")")
	fs.StringVar(&c.trustCerts, "tls-trust-certs", os.Getenv(envTrustCerts),
		"`file` of trusted CA certificates for pulsar+ssl:// (env "+envTrustCerts+")")
	fs.BoolVar(&c.allowInsecure, "tls-allow-insecure", insecure,
		"accept any TLS certificate (env "+envAllowInsecure+"=true)")
	fs.DurationVar(&c.timeout, "connect-timeout", 10*time.Second, "how long to wait for the broker")
	fs.BoolVar(&c.verbose, "v", false, "log the client's activity to standard error")
}

// client creates a Pulsar client from the flags. Its logs go to stderr with -v and
// nowhere otherwise; never to the client's default global logger.
func (c *connFlags) client(stderr io.Writer) (apulsar.Client, error) {
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
	cl, err := apulsar.NewClient(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.url, err)
	}
	return cl, nil
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

// failLine prints err as one line, "command: message", with the line breaks of joined
// errors folded into "; ", and returns the failure exit status.
func failLine(stderr io.Writer, command string, err error) int {
	msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
	fmt.Fprintf(stderr, "%s: %s\n", command, msg)
	return exitFail
}

// parseFlags parses args with fs and maps the outcome onto an exit status: -1 means go on.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage
	}
	return -1
}
