package pulsartest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// TestAdminHTTPLeavesNoConnections runs the admin REST helpers of the suite against the embedded broker's admin
// endpoint and checks, while that server still runs (as a real broker outlives the test run), that no goroutine
// of theirs is left once the calling test ended. Helpers on the default HTTP client keep a keep-alive
// connection, with a read and a write goroutine, for as long as the server keeps it open: against the embedded
// broker Close hid that, against a real one goleak failed the package after every test had passed.
//
// It is not parallel: goleak looks at every goroutine of the process, and parallel tests wait until the
// sequential ones are done.
func TestAdminHTTPLeavesNoConnections(t *testing.T) {
	b := pulsartest.NewBroker(t, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	before := goleak.IgnoreCurrent()
	t.Run("admin calls", func(t *testing.T) {
		createPartitionedREST(t, b.AdminURL(), "leak-check", 2)
		assert.Empty(t, listSubscriptionsREST(t, b.AdminURL(), "leak-check-partition-0"))
		code, _ := adminDo(t, http.MethodGet, b.AdminURL()+"/admin/v2/persistent/public/default", "")
		assert.Equal(t, http.StatusOK, code)
	})
	require.NoError(t, goleak.Find(leaktest.Options(before)...))
}

// TestAdminHTTPOnlyThroughTheHelper keeps the package's tests off the process-wide HTTP client, whose
// keep-alive connections outlive a test (TestAdminHTTPLeavesNoConnections checks the helper itself).
func TestAdminHTTPOnlyThroughTheHelper(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	// Spelled in pieces so that this file does not match itself.
	banned := []string{"http." + "DefaultClient", "http." + "Get(", "http." + "Post(", "http." + "Head(", "http." + "PostForm("}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, bad := range banned {
			assert.NotContains(t, string(src), bad,
				"%s: use adminHTTP(t), whose connections are closed when the test ends", f)
		}
	}
}
