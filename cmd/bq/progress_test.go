package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
)

// tty is a stderr that says it is a terminal, so that a command shows what it shows on one.
type tty struct{ bytes.Buffer }

func (*tty) IsTerminal() bool { return true }

// runBQOnTerminal runs bq with a stderr that is a terminal.
func runBQOnTerminal(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out bytes.Buffer
	var errOut tty
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// redriveLines is what a redrive of seedDeadLetters' three copies prints on stdout, ids
// aside, whether stderr is a terminal or not.
var redriveLines = regexp.MustCompile(`^moved \S+  annotated  reason=failed urn=urn:babel:orders:created [^\n]*
moved \S+  annotated  reason=failed urn=urn:babel:orders:cancelled [^\n]*
left \(poison, never republished\) \S+  poison     reason=poison urn=- [^\n]*
moved 2, skipped 0 \(filters\), poison 1, raw 0
$`)

func TestDLQRedrivePrintsPlainLinesOffATerminal(t *testing.T) {
	e := newDLQEnv(t, brokertest.Embedded(t))
	e.createRetention(t)
	seedDeadLetters(t, e.tg.URL, e.dlq)
	code, stdout, stderr := runBQ(t, "dlq", "redrive", e.url, e.admin, "--topic", e.dlq, "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, redriveLines, stdout)
	assert.Empty(t, stderr, "no bar where stderr is not a terminal")
}

// barLine is a rendering of the progress bar with a known total after a first message and
// before the last (the one with the time left): percentage, bar, count, rate, elapsed:left.
var barLine = regexp.MustCompile(`redrive +\d+% \|[^|]*\| \([12]/3, \d+ msg/(s|min|hr)\) \[\d\S*:\d\S*\]`)

func TestDLQRedriveShowsABarOnATerminal(t *testing.T) {
	e := newDLQEnv(t, brokertest.Embedded(t))
	e.createRetention(t)
	seedDeadLetters(t, e.tg.URL, e.dlq)
	code, stdout, stderr := runBQOnTerminal(t, "dlq", "redrive", e.admin, "--topic", e.dlq, "--dry-run")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "would move 2, skipped 0 (filters), poison 1, raw 0\n", "stdout as off a terminal")
	assert.Regexp(t, `redrive --dry-run +\d+% \|[^|]*\| \([12]/3, \d+ msg/(s|min|hr)\) \[\d\S*:\d\S*\]`, stderr)

	code, stdout, stderr = runBQOnTerminal(t, "dlq", "redrive", e.url, e.admin, "--topic", e.dlq, "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, redriveLines, stdout, "stdout as off a terminal")
	assert.Regexp(t, barLine, stderr, "the total is the backlog, 3")
	assert.Contains(t, stderr, "100% |", "filled at the end")
	assert.True(t, strings.HasSuffix(stderr, "\n"), "the bar's line is ended: %q", stderr)
	assert.Equal(t, 1, e.backlog(t), "the poison copy is left")
}

// TestDLQRedriveBarCountsEveryMessageOfABatch: the admin API's backlog counts entries, and a
// batch is one entry, so the total is a floor: the bar keeps counting past it.
func TestDLQRedriveBarCountsEveryMessageOfABatch(t *testing.T) {
	e := newDLQEnv(t, brokertest.Embedded(t))
	e.createRetention(t)
	seedBatchedDeadLetters(t, e.tg.URL, e.dlq)
	require.Equal(t, 1, e.backlog(t), "three messages in one entry")
	code, stdout, stderr := runBQOnTerminal(t, "dlq", "redrive", e.url, e.admin, "--topic", e.dlq, "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, redriveLines, stdout)
	assert.Contains(t, stderr, "100% |")
	assert.Contains(t, stderr, "(3/3,", "every message counted")
}

func TestDLQRedriveShowsASpinnerWithoutATotal(t *testing.T) {
	e := newDLQEnv(t, brokertest.Embedded(t))
	e.createRetention(t)
	seedDeadLetters(t, e.tg.URL, e.dlq)
	// No admin API answers, so the backlog is unknown: a spinner with the count and the rate.
	code, stdout, stderr := runBQOnTerminal(t, "dlq", "redrive", e.url, "--admin-url", "http://127.0.0.1:1",
		"--topic", e.dlq, "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, redriveLines, stdout)
	assert.Regexp(t, `redrive \(3/-, \d+ msg/(s|min|hr)\)`, stderr)
	assert.NotContains(t, stderr, "%", "no percentage without a total")
}
