package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// sevenAt is the failed_at of the first of the seven dead letters; the others follow an
// hour apart.
var sevenAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// seedSeven writes seven annotated dead letters of three URNs and two reasons: created
// failed ×3, cancelled unknown_urn ×2, created unknown_urn ×1, refunded failed ×1.
func seedSeven(t *testing.T, url, topic string) {
	t.Helper()
	p := seedProducer(t, url, topic)
	const created, cancelled, refunded = "urn:babel:orders:created", "urn:babel:orders:cancelled", "urn:babel:orders:refunded"
	for i, l := range []struct {
		urn    string
		reason envelope.Reason
	}{
		{created, envelope.ReasonFailed},
		{cancelled, envelope.ReasonUnknownURN},
		{created, envelope.ReasonFailed},
		{refunded, envelope.ReasonFailed},
		{created, envelope.ReasonUnknownURN},
		{cancelled, envelope.ReasonUnknownURN},
		{created, envelope.ReasonFailed},
	} {
		env, err := envelope.Make(l.urn, map[string]any{"order_id": i}, envelope.WithQueue("orders"))
		require.NoError(t, err)
		dead := env.ToDeadLetter(envelope.DeadLetterInfo{
			Reason: l.reason, Cause: errors.New("boom"), Attempts: 3, FailedAt: sevenAt.Add(time.Duration(i) * time.Hour),
		})
		body, err := dead.Encode()
		require.NoError(t, err)
		_, err = p.Send(context.Background(), &apulsar.ProducerMessage{Payload: body, Properties: bqpulsar.ProjectProperties(dead)})
		require.NoError(t, err)
	}
}

func TestDLQStats(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) { dlqStats(t, newDLQEnv(t, tg)) })
}

func dlqStats(t *testing.T, e *dlqEnv) {
	e.createRetention(t)
	seedSeven(t, e.tg.URL, e.dlq)
	before := e.state(t)
	require.Equal(t, []string{"bq-dlq"}, brokertest.Subscriptions(t, e.adminURL, e.dlq))
	require.Equal(t, 7, e.backlog(t))

	code, stdout, stderr := runBQ(t, "dlq", "stats", e.url, e.admin, "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stderr)
	t.Logf("bq dlq stats:\n%s", stdout)
	head, tail, ok := strings.Cut(stdout, "\noldest  ")
	require.True(t, ok, stdout)
	assert.Equal(t, "7 dead letter(s) pending on "+e.dlq+" (subscription bq-dlq)\n"+`
URN                         REASON       COUNT
urn:babel:orders:created    failed           3  ########################################
urn:babel:orders:cancelled  unknown_urn      2  ###########################
urn:babel:orders:created    unknown_urn      1  #############
urn:babel:orders:refunded   failed           1  #############
`, head)
	assert.Regexp(t, `^\d+d \d+h ago  \(2026-01-01T00:00:00Z, failed_at\)
newest  \d+d \d+h ago  \(2026-01-01T06:00:00Z, failed_at\)
$`, tail)

	code, stdout, stderr = runBQ(t, "dlq", "stats", e.url, e.admin, "--topic", e.dlq, "--json")
	require.Equal(t, exitOK, code, stderr)
	var doc statsJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc), "stdout is one JSON document and nothing else: %s", stdout)
	assert.Equal(t, e.dlq, doc.Topic)
	assert.Equal(t, "bq-dlq", doc.Subscription)
	assert.Equal(t, 7, doc.Total)
	assert.Equal(t, []statsRowJSON{
		{URN: "urn:babel:orders:created", Reason: "failed", Count: 3},
		{URN: "urn:babel:orders:cancelled", Reason: "unknown_urn", Count: 2},
		{URN: "urn:babel:orders:created", Reason: "unknown_urn", Count: 1},
		{URN: "urn:babel:orders:refunded", Reason: "failed", Count: 1},
	}, doc.Rows)
	require.NotNil(t, doc.Oldest)
	require.NotNil(t, doc.Newest)
	assert.Equal(t, "2026-01-01T00:00:00.000Z", doc.Oldest.Time)
	assert.Equal(t, "2026-01-01T06:00:00.000Z", doc.Newest.Time)
	assert.Equal(t, "failed_at", doc.Oldest.Source)
	assert.Equal(t, int64(6*3600), doc.Oldest.AgeSeconds-doc.Newest.AgeSeconds, "ages of one run, 6 h apart")
	var fields map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &fields))
	assert.ElementsMatch(t, []string{"topic", "subscription", "total", "rows", "oldest", "newest"}, keys(fields), "the documented fields")

	assert.Equal(t, before, e.state(t), "stats changes no topic, subscription, backlog or consumer")
	assert.Equal(t, []string{"bq-dlq"}, brokertest.Subscriptions(t, e.adminURL, e.dlq), "no new subscription")
	assert.Equal(t, 7, e.backlog(t), "nothing acknowledged")
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestDLQStatsOfPoisonAndEmpty(t *testing.T) {
	e := newDLQEnv(t, brokertest.Embedded(t))
	e.createRetention(t)
	code, stdout, stderr := runBQ(t, "dlq", "stats", e.url, e.admin, "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "0 dead letter(s) pending on "+e.dlq+" (subscription bq-dlq)\n", stdout)
	code, stdout, stderr = runBQ(t, "dlq", "stats", e.url, e.admin, "--topic", e.dlq, "--json")
	require.Equal(t, exitOK, code, stderr)
	assert.JSONEq(t, `{"topic":"`+e.dlq+`","subscription":"bq-dlq","total":0,"rows":[],"oldest":null,"newest":null}`, stdout)

	seedDeadLetters(t, e.tg.URL, e.dlq) // created failed, cancelled failed, a poison copy
	code, stdout, stderr = runBQ(t, "dlq", "stats", e.url, e.admin, "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `\n- +poison +1  #{40}\n`, stdout, "a poison copy names no URN")
	assert.Regexp(t, `\nurn:babel:orders:created +failed +1  #{40}\n`, stdout)
}

func TestDLQStatsRefusesBadInput(t *testing.T) {
	e := newDLQEnv(t, brokertest.Embedded(t))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dlq", "stats"}, exitUsage, "bq dlq stats: --topic is required\n"},
		{[]string{"dlq", "stats", "--topic", "a/b"}, exitUsage, "bq dlq stats: --topic: dlq: invalid topic"},
		{[]string{"dlq", "stats", "--topic", "o.dlq", "--json=maybe"}, exitUsage, "bq dlq stats: invalid boolean value"},
		{[]string{"dlq", "stats", "--topic", "o.dlq", "--admin-url", "pulsar://x:6650"}, exitUsage, "the scheme must be http or https"},
		{[]string{"dlq", "stats", e.admin, "--topic", e.dlq}, exitFail, "subscription not found; fix: "},
		{[]string{"dlq", "stats", "--admin-url", "http://127.0.0.1:1", "--topic", "o.dlq"}, exitFail, "connection refused"},
	} {
		code, stdout, stderr := runBQ(t, tc.args...)
		assert.Equal(t, tc.code, code, "%v", tc.args)
		assert.Empty(t, stdout, "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %v", tc.args)
	}
	assert.Empty(t, e.tg.Broker.Topics(), "no topic created")
}

// TestDLQCommandsGoThroughTheEnvironmentsProxy runs the built command (net/http reads the
// proxy variables once per process) against the embedded broker: the proxy that HTTP_PROXY
// names carries the admin calls, an HTTP proxy and a SOCKS5 one. The admin URL names a host
// that is not loopback, which net/http would not send through a proxy; the test proxies take
// every host to the broker.
func TestDLQCommandsGoThroughTheEnvironmentsProxy(t *testing.T) {
	e := newDLQEnv(t, brokertest.Embedded(t))
	e.createRetention(t)
	seedDeadLetters(t, e.tg.URL, e.dlq)
	u, err := url.Parse(e.adminURL)
	require.NoError(t, err)
	admin := "--admin-url=http://bq-admin.invalid:" + u.Port()
	for _, tc := range []struct {
		name  string
		proxy *brokertest.Proxy
	}{
		{"HTTP", brokertest.StartHTTPProxy(t, nil)},
		{"SOCKS5", brokertest.StartSOCKS5(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"HTTP_PROXY=" + tc.proxy.URL.String(), "HTTPS_PROXY=", "https_proxy=", "NO_PROXY=", "no_proxy="}
			cmd, stdout, stderr := startBQWithEnv(t, env, "dlq", "stats", e.url, admin, "--topic", e.dlq)
			err := cmd.Wait()
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				t.Fatalf("bq dlq stats: exit status %d: %s", exit.ExitCode(), stderr.String())
			}
			require.NoError(t, err)
			assert.Contains(t, stdout.String(), "3 dead letter(s) pending on "+e.dlq)
			assert.Positive(t, tc.proxy.Used.Load(), "through the proxy")
		})
	}
}
