package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m, append(leaktest.TxnClientGoroutines, // TestBrokerCommandTransactions
		// After a failed connection probe (refused handshake, timeout), the client's lookup
		// goroutine retries until its OperationTimeout (the --timeout) before it sees that
		// the client is closed, as pulsar.Connect documents; the bq process exits anyway.
		goleak.IgnoreAnyFunction("github.com/babelqueue/babelqueue-go-pulsar/pulsar.probeBroker.func1"),
		goleak.Cleanup(func(code int) {
			removeBuiltBQ()
			os.Exit(code)
		}))...)
}

func runBQ(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsage(t *testing.T) {
	code, _, stderr := runBQ(t)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "Commands:")

	code, stdout, _ := runBQ(t, "--help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "conformance")

	code, _, stderr = runBQ(t, "frobnicate")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "bq: unknown command \"frobnicate\"; see `bq --help`\n", stderr)

	code, _, stderr = runBQ(t, "--bogus")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "bq: unknown flag --bogus; see `bq --help`\n", stderr)

	// A command with subcommands, called without one, is called wrongly too.
	code, stdout, stderr = runBQ(t, "dlq")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.True(t, strings.HasPrefix(stderr, "Usage: bq dlq <list|peek|stats|redrive|purge>"), stderr)
}

func TestConformanceCommand(t *testing.T) {
	code, stdout, stderr := runBQ(t, "conformance", "--suite", "../../conformance/testdata/suite")
	assert.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "PASS    cases/payment-captured\n")
	assert.Contains(t, stdout, "N/A     sqs: another broker's binding (Amazon SQS)\n")
	assert.Regexp(t, `(?m)^conformance: \d+ passed, 0 failed, 2 not applicable, 0 skipped$`, stdout)

	code, stdout, _ = runBQ(t, "conformance", "-suite", "../../conformance/testdata/failing")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stdout, "FAIL    cases/wrong-urn: ")

	code, _, stderr = runBQ(t, "conformance")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "bq conformance: --suite is required (for example --suite ../shared/babelqueue-conformance)\n", stderr)

	code, _, stderr = runBQ(t, "conformance", "--suite", "does-not-exist")
	assert.Equal(t, exitFail, code)
	assert.True(t, strings.HasPrefix(stderr, "bq conformance: conformance: invalid suite: "), stderr)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "errors are one line")

	code, _, stderr = runBQ(t, "conformance", "--suite", "x", "extra")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `unexpected argument "extra"`)

	code, _, stderr = runBQ(t, "conformance", "--nope")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "bq conformance: flag provided but not defined: -nope; see `bq conformance --help`\n", stderr)
}

func TestConformanceCommandCanonicalSuite(t *testing.T) {
	const dir = "../../../shared/babelqueue-conformance"
	if _, err := os.Stat(dir + "/manifest.json"); err != nil {
		t.Skipf("canonical suite not found at %s: %v", dir, err)
	}
	code, stdout, stderr := runBQ(t, "conformance", "--suite", dir)
	assert.Equal(t, exitOK, code, stdout+stderr)
	assert.Contains(t, stdout, "N/A     kafka: another broker's binding (Apache Kafka)\n")
}
