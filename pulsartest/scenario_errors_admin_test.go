package pulsartest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
)

// The admin API's 404, 409 and 412 reasons are Pulsar 4.0's.
func TestErrorsOfTheAdminAPI(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "the admin API")
		base := admin + "/admin/v2/persistent/public/default/"
		missing := "persistent://public/default/" + topic + "-missing"
		existing := topic + "-existing"
		createPartitionedREST(t, admin, existing, 2)
		for _, tc := range []struct {
			method, path string
			code         int
			reason       string
		}{
			{http.MethodGet, topic + "-missing/stats", http.StatusNotFound, "Topic " + missing + " not found"},
			{http.MethodGet, topic + "-missing/subscriptions", http.StatusNotFound, "Topic " + missing + " not found"},
			{http.MethodPost, topic + "-missing/terminate", http.StatusNotFound, "Topic " + missing + " not found"},
			{http.MethodGet, topic + "-missing/ledger/1/entry/0", http.StatusNotFound, "Topic " + missing + " not found"},
			{http.MethodGet, topic + "-missing/subscription/s/position/1", http.StatusNotFound, "Topic " + missing + " not found"},
			{http.MethodDelete, topic + "-missing", http.StatusNotFound, "Topic " + missing + " not found"},
			{http.MethodDelete, topic + "-missing/partitions", http.StatusNotFound, "Topic " + missing + " not found."},
			{http.MethodGet, topic + "-missing/partitioned-stats", http.StatusNotFound, "Partitioned Topic " + missing + " not found"},
			{http.MethodGet, existing + "/stats", http.StatusNotFound, "Topic persistent://public/default/" + existing + " not found"},
			{http.MethodPut, existing + "/partitions", http.StatusConflict, "This topic already exists"},
			{http.MethodPut, existing, http.StatusConflict, "This topic already exists"},
		} {
			body := ""
			if strings.HasSuffix(tc.path, "/partitions") && tc.method == http.MethodPut {
				body = "2"
			}
			code, got := brokertest.AdminDo(t, tc.method, base+tc.path, body)
			assert.Equal(t, tc.code, code, "%s %s: %s", tc.method, tc.path, got)
			assert.JSONEq(t, jsonReason(t, tc.reason), string(got), "%s %s", tc.method, tc.path)
		}
		// A topic with connected clients is not deleted: 412 with the count of a non-partitioned topic's producers
		// and consumers, or without one for a partitioned topic.
		busy := topic + "-busy"
		subscribe(t, c, apulsar.ConsumerOptions{Topic: busy, SubscriptionName: "a"})
		subscribe(t, c, apulsar.ConsumerOptions{Topic: busy, SubscriptionName: "b"})
		newProducer(t, c, apulsar.ProducerOptions{Topic: busy})
		code, got := brokertest.AdminDo(t, http.MethodDelete, base+busy, "")
		assert.Equal(t, http.StatusPreconditionFailed, code, "%s", got)
		assert.JSONEq(t, jsonReason(t, "Topic has 3 connected producers/consumers"), string(got))
		subscribe(t, c, apulsar.ConsumerOptions{Topic: existing, SubscriptionName: "a"})
		code, got = brokertest.AdminDo(t, http.MethodDelete, base+existing+"/partitions", "")
		assert.Equal(t, http.StatusPreconditionFailed, code, "%s", got)
		assert.JSONEq(t, jsonReason(t, "Topic has active producers/subscriptions"), string(got))

		// An unknown path is a 404 on both; the bodies differ (doc.go).
		code, _ = brokertest.AdminDo(t, http.MethodGet, admin+"/admin/v2/no-such-resource", "")
		assert.Equal(t, http.StatusNotFound, code)
	})
}

func jsonReason(t *testing.T, reason string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"reason": reason})
	require.NoError(t, err)
	return string(b)
}
