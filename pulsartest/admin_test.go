package pulsartest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

func adminDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	code, _, b := adminCall(t, method, url, body)
	return code, b
}

// adminCall is adminDo with the answer's headers, which carry a peeked entry's metadata.
func adminCall(t *testing.T, method, url, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := adminHTTP(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func TestAdminHTTPSubset(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	base := b.AdminURL() + "/admin/v2/persistent/public/default"
	code, _ := adminDo(t, http.MethodPut, base+"/orders/partitions", "3")
	assert.Equal(t, http.StatusNoContent, code)
	code, _ = adminDo(t, http.MethodPut, base+"/orders/partitions", "3")
	assert.Equal(t, http.StatusConflict, code)
	code, body := adminDo(t, http.MethodGet, base+"/orders/partitions", "")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"partitions":3,"deleted":false}`, body)
	code, _ = adminDo(t, http.MethodPut, base+"/plain", "")
	assert.Equal(t, http.StatusNoContent, code)

	code, body = adminDo(t, http.MethodGet, base, "")
	assert.Equal(t, http.StatusOK, code)
	var topics []string
	require.NoError(t, json.Unmarshal([]byte(body), &topics))
	assert.Equal(t, []string{
		"persistent://public/default/orders-partition-0", "persistent://public/default/orders-partition-1",
		"persistent://public/default/orders-partition-2", "persistent://public/default/plain",
	}, topics)
	code, body = adminDo(t, http.MethodGet, base+"/partitioned", "")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `["persistent://public/default/orders"]`, body)

	code, body = adminDo(t, http.MethodPut, base+"/plain/compaction", "")
	assert.Equal(t, http.StatusNotImplemented, code)
	assert.Contains(t, body, "not supported")
	code, _ = adminDo(t, http.MethodGet, b.AdminURL()+"/admin/v2/clusters", "")
	assert.Equal(t, http.StatusNotFound, code)

	code, _ = adminDo(t, http.MethodDelete, base+"/orders/partitions", "")
	assert.Equal(t, http.StatusNoContent, code)
	code, _ = adminDo(t, http.MethodDelete, base+"/plain", "")
	assert.Equal(t, http.StatusNoContent, code)
	assert.Empty(t, b.Topics())
}
