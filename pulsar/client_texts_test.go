package pulsar

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientConnectionErrorTexts: every text by which the binding recognises a connection
// failure of pulsar-client-go (the error texts of isConnectionLevel and the log messages of
// connectWatch) is still written, as a string literal, in the source of the client version
// that go.mod requires. The client exports none of them, so a release that rewords one
// would otherwise break the matching silently: a connection failure would no longer become
// a *ConnectError, or its cause would no longer be named. Checked against v0.21.0.
func TestClientConnectionErrorTexts(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to find the client's source")
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/apache/pulsar-client-go").Output()
	require.NoError(t, err, "go list -m github.com/apache/pulsar-client-go")
	dir := filepath.Join(strings.TrimSpace(string(out)), "pulsar", "internal")
	var src strings.Builder
	for _, f := range []string{"connection.go", "commands.go", "rpc_client.go"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		src.Write(b)
	}
	code := src.String()
	for _, s := range clientConnectionErrors {
		// The whole error text, quoted: errors.New("connection error").
		//nolint:testifylint // assert.Contains would print the client's whole source on failure
		assert.True(t, strings.Contains(code, strconv.Quote(s)), "error text %q is gone from the client's source", s)
	}
	for _, s := range []string{logDialFailed, logTLSConfigFailed, logAuthDataFailed, logHandshakeFailed, logRefusedFormat} {
		// A prefix of the logged message: the opening quote and the text.
		//nolint:testifylint // assert.Contains would print the client's whole source on failure
		assert.True(t, strings.Contains(code, `"`+s), "log message %q is gone from the client's source", s)
	}
}
