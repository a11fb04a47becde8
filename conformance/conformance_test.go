package conformance_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/conformance"
)

// canonicalSuite is the cross-SDK suite, read from the shared folder beside the repository.
const canonicalSuite = "../../shared/babelqueue-conformance"

func TestCanonicalSuite(t *testing.T) {
	if _, err := os.Stat(filepath.Join(canonicalSuite, "manifest.json")); err != nil {
		t.Skipf("canonical BabelQueue conformance suite not found at %s (it lives in ../shared beside the repository): %v",
			canonicalSuite, err)
	}
	s, err := conformance.Load(canonicalSuite)
	require.NoError(t, err)
	s.Run(t)

	sum := conformance.Summarize(s.Results())
	assert.Zero(t, sum.Failed)
	assert.Positive(t, sum.Passed)
}

func TestOwnSuite(t *testing.T) {
	s, err := conformance.Load("testdata/suite")
	require.NoError(t, err)
	s.Run(t)

	results := s.Results()
	sum := conformance.Summarize(results)
	assert.Zero(t, sum.Failed)
	assert.GreaterOrEqual(t, sum.Passed, 75)
	assert.Equal(t, 2, sum.NotApplicable, "sqs and asb are not applicable")
	blocks := map[string]int{}
	for _, r := range results {
		blocks[r.Block]++
	}
	for _, b := range []string{
		"cases", "pulsar.property_projection", "pulsar.attempts_reconciliation",
		"pulsar.schema_version_gate", "roundtrip", "data_shape", "forbidden_keys",
		"idempotency.dedup_key", "idempotency.sequences", "payload_schema",
	} {
		assert.Positive(t, blocks[b], "block %s ran no case", b)
	}
}

func TestFailingSuiteFailsEveryCase(t *testing.T) {
	s, err := conformance.Load("testdata/failing")
	require.NoError(t, err)
	results := s.Results()
	require.Len(t, results, 21)
	for _, r := range results {
		assert.Contains(t, []conformance.Status{conformance.StatusFail, conformance.StatusUnknown}, r.Status,
			"%s must not pass", r.Name())
		assert.NotEmpty(t, r.Reason, r.Name())
	}
	reasons := map[string]string{}
	for _, r := range results {
		reasons[r.Name()] = r.Reason
	}
	assert.Contains(t, reasons["cases/escaping-path"], "outside the suite directory")
	assert.Contains(t, reasons["cases/wrong-rule"], `want "utf8"`)
	assert.Contains(t, reasons["pulsar.property_projection/fixtures/payment-captured.json"], "projected 6 properties")
	assert.Contains(t, reasons["roundtrip/wrong-text"], "want exactly 77.0")
	assert.Contains(t, reasons["roundtrip/wrong-text-in-an-array"], "re-emitted as 1.50, want exactly 1.5")
	assert.Contains(t, reasons["cases/wrong-dead-letter"], `dead_letter.reason = "failed", want "poison"`)
	assert.Contains(t, reasons["cases/no-dead-letter"], "no dead_letter block decoded")
	assert.Contains(t, reasons["cases/wrong-bool"], `"paid":true`)
	assert.Contains(t, reasons["data_shape/wrong-verdict"], "accepted, want rejected")
}

func TestUnknownBlocks(t *testing.T) {
	s, err := conformance.Load("testdata/unknown-block")
	require.NoError(t, err)
	sum := conformance.Summarize(s.Results())
	assert.Equal(t, 2, sum.Failed, "unknown blocks fail the run")

	s, err = conformance.Load("testdata/unknown-block", conformance.WithSkipUnknown(true))
	require.NoError(t, err)
	sum = conformance.Summarize(s.Results())
	assert.Equal(t, conformance.Summary{Skipped: 2}, sum)
}

func TestLoadErrors(t *testing.T) {
	_, err := conformance.Load("testdata/wrong-version")
	require.ErrorIs(t, err, conformance.ErrSuite)
	assert.Contains(t, err.Error(), "schema_version 2")

	_, err = conformance.Load("testdata/does-not-exist")
	require.ErrorIs(t, err, conformance.ErrSuite)

	unversioned := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(unversioned, "manifest.json"), []byte(`{"cases": []}`), 0o600))
	_, err = conformance.Load(unversioned)
	require.ErrorIs(t, err, conformance.ErrSuite, "a manifest that names no version is refused")
	assert.Contains(t, err.Error(), "no schema_version")
}

func TestReport(t *testing.T) {
	s, err := conformance.Load("testdata/failing")
	require.NoError(t, err)
	var buf bytes.Buffer
	sum, err := s.Report(&buf)
	require.NoError(t, err)
	assert.False(t, sum.OK())
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	assert.Len(t, lines, 22, "one line per case and a summary")
	assert.True(t, strings.HasPrefix(lines[0], "FAIL    cases/wrong-urn: urn = "), lines[0])
	assert.Equal(t, "conformance: 0 passed, 21 failed, 0 not applicable, 0 skipped", lines[len(lines)-1])

	s, err = conformance.Load("testdata/suite")
	require.NoError(t, err)
	buf.Reset()
	sum, err = s.Report(&buf)
	require.NoError(t, err)
	assert.True(t, sum.OK())
	assert.Contains(t, buf.String(), "N/A     sqs: another broker's binding (Amazon SQS)\n")
}
