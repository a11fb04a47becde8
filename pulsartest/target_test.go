package pulsartest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// capabilities records broker behaviour that differs between versions (BROKER.md §9).
type capabilities struct {
	// A consumer leaving a Shared subscription raises the redelivery count of what it had not acknowledged:
	// Pulsar 2.x (PULSAR_REDELIVERY_ON_DISCONNECT=true), not 3.x or 4.0.
	redeliveryOnDisconnect bool
	failoverFirstConnected bool
	chunking               bool // the broker is configured with a small max message size
	faults                 bool // fault hooks available (embedded only)
}

// target is where the scenario suite runs: the embedded broker or a real one (PULSAR_URL).
type target interface {
	ServiceURL() string
	CreatePartitionedTopic(t *testing.T, name string, n int)
	UniqueTopic(t *testing.T) string
	Capabilities() capabilities
	Broker() *pulsartest.Broker // nil for a real broker
	AdminURL() string           // admin REST base URL; "" when a real broker runs without PULSAR_ADMIN_URL
}

var topicSeq atomic.Int64

func uniqueName(t *testing.T, prefix string) string {
	t.Helper()
	n := strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(t.Name())
	if len(n) > 60 {
		n = n[len(n)-60:]
	}
	return fmt.Sprintf("%s-%s-%d-%d", prefix, strings.ToLower(n), time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

type embeddedTarget struct {
	b *pulsartest.Broker
}

func newEmbedded(t *testing.T, opts ...pulsartest.Option) *embeddedTarget {
	t.Helper()
	opts = append([]pulsartest.Option{pulsartest.WithAdminHTTP("127.0.0.1:0")}, opts...)
	return &embeddedTarget{b: pulsartest.NewBroker(t, opts...)}
}

func (e *embeddedTarget) ServiceURL() string         { return e.b.URL() }
func (e *embeddedTarget) Broker() *pulsartest.Broker { return e.b }
func (e *embeddedTarget) AdminURL() string           { return e.b.AdminURL() }
func (*embeddedTarget) UniqueTopic(t *testing.T) string {
	t.Helper()
	return uniqueName(t, "t")
}

func (*embeddedTarget) Capabilities() capabilities {
	return capabilities{chunking: true, faults: true}
}

// CreatePartitionedTopic goes through the admin REST subset, the same path as for a real broker.
func (e *embeddedTarget) CreatePartitionedTopic(t *testing.T, name string, n int) {
	t.Helper()
	createPartitionedREST(t, e.b.AdminURL(), name, n)
}

type realTarget struct {
	url   string
	admin string // admin REST base URL, e.g. http://127.0.0.1:8080
}

func (r *realTarget) ServiceURL() string       { return r.url }
func (*realTarget) Broker() *pulsartest.Broker { return nil }
func (r *realTarget) AdminURL() string         { return r.admin }
func (*realTarget) UniqueTopic(t *testing.T) string {
	t.Helper()
	return uniqueName(t, "t")
}

func (*realTarget) Capabilities() capabilities {
	return capabilities{
		redeliveryOnDisconnect: os.Getenv("PULSAR_REDELIVERY_ON_DISCONNECT") == "true",
		failoverFirstConnected: os.Getenv("PULSAR_FAILOVER_FIRST_CONNECTED") == "true",
		chunking:               os.Getenv("PULSAR_SMALL_MAX_MESSAGE_SIZE") == "true",
	}
}

func (r *realTarget) CreatePartitionedTopic(t *testing.T, name string, n int) {
	t.Helper()
	if r.admin == "" {
		brokertest.Unavailable(t, brokertest.EnvAdminURL+" is not set: partitioned topics need the admin API on a real broker")
	}
	createPartitionedREST(t, r.admin, name, n)
}

// needAdmin returns the target's admin REST base URL, or ends the test as brokertest.Unavailable when a real
// broker runs without PULSAR_ADMIN_URL; what stands for what the test needs it for.
func needAdmin(t *testing.T, tg target, what string) string {
	t.Helper()
	if tg.AdminURL() == "" {
		brokertest.Unavailable(t, brokertest.EnvAdminURL+" is not set: "+what+" needs the admin API on a real broker")
	}
	return tg.AdminURL()
}

// targetCase starts one target for one (sub)test; t.Run calls it inside the subtest.
type targetCase struct {
	name  string
	start func(t *testing.T) target
}

// eachTarget runs scenario as a parallel subtest on every target, with a client connected to
// it and a topic unique to the subtest.
func eachTarget(t *testing.T, scenario func(t *testing.T, tg target, c apulsar.Client, topic string)) {
	t.Helper()
	t.Parallel()
	for _, tc := range targets() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tg := tc.start(t)
			scenario(t, tg, newClient(t, tg.ServiceURL()), tg.UniqueTopic(t))
		})
	}
}

// targets lists where the suite runs: the embedded broker always, a real broker when PULSAR_URL is set. A real
// half that cannot run ends as brokertest.Unavailable says, the rule every dual-target test of the module shares:
// a skip, or a failure under REAL_PULSAR_REQUIRED=1.
func targets() []targetCase {
	return []targetCase{
		{name: "embedded", start: func(t *testing.T) target {
			t.Helper()
			return newEmbedded(t)
		}},
		{name: "real", start: func(t *testing.T) target {
			t.Helper()
			url, admin := brokertest.RealURLs(t)
			return &realTarget{url: url, admin: admin}
		}},
	}
}

func newClient(t *testing.T, url string) apulsar.Client {
	t.Helper()
	return newClientOf(t, url, false)
}

// newClientOf returns a client for url, closed when the test ends; txn enables transactions.
func newClientOf(t *testing.T, url string, txn bool) apulsar.Client {
	t.Helper()
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL:               url,
		OperationTimeout:  5 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            plog.DefaultNopLogger(),
		EnableTransaction: txn,
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// newClientSeeingCloses returns a client for url, closed when the test ends, and a condition
// that holds once one of its producers has begun to close on its own (the broker fenced it,
// or terminated its topic). A test waits for that instead of polling with Send: in
// pulsar-client-go v0.21.0, as in v0.19.0 (its producer code is unchanged there), a producer's
// reconnect goroutine closes its data channel while a Send that passed the state check may
// still send on it, a data race in the client that the race detector charges to every test
// running in parallel. The client logs "Closing producer"
// after the producer has left the ready state, so a Send after it fails with
// ErrProducerClosed before it reaches the channel.
func newClientSeeingCloses(t *testing.T, url string) (apulsar.Client, func() bool) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL:               url,
		OperationTimeout:  5 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            bqpulsar.NewClientLogger(zap.New(core)),
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, func() bool { return logs.FilterMessage("Closing producer").Len() > 0 }
}

func newProducer(t *testing.T, c apulsar.Client, opts apulsar.ProducerOptions) apulsar.Producer {
	t.Helper()
	p, err := c.CreateProducer(opts)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func subscribe(t *testing.T, c apulsar.Client, opts apulsar.ConsumerOptions) apulsar.Consumer {
	t.Helper()
	if opts.NackRedeliveryDelay == 0 {
		opts.NackRedeliveryDelay = 100 * time.Millisecond
	}
	if opts.AckGroupingOptions == nil && !opts.AckWithResponse {
		opts.AckGroupingOptions = &apulsar.AckGroupingOptions{MaxSize: 1000, MaxTime: 10 * time.Millisecond}
	}
	k, err := c.Subscribe(opts)
	require.NoError(t, err)
	var once sync.Once
	t.Cleanup(func() { once.Do(k.Close) })
	return k
}

func sendAll(t *testing.T, p apulsar.Producer, payloads ...string) []apulsar.MessageID {
	t.Helper()
	ids := make([]apulsar.MessageID, 0, len(payloads))
	for _, s := range payloads {
		id, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte(s)})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids
}

func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m-%d", i)
	}
	return out
}

const receiveTimeout = 10 * time.Second

func receive(t *testing.T, k apulsar.Consumer) apulsar.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), receiveTimeout)
	defer cancel()
	m, err := k.Receive(ctx)
	require.NoError(t, err, "receive")
	return m
}

func receiveN(t *testing.T, k apulsar.Consumer, n int) []apulsar.Message {
	t.Helper()
	out := make([]apulsar.Message, 0, n)
	for range n {
		out = append(out, receive(t, k))
	}
	return out
}

// expectNone asserts that nothing arrives within d.
func expectNone(t *testing.T, k apulsar.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	m, err := k.Receive(ctx)
	if err == nil {
		t.Fatalf("unexpected message %q (id %v)", m.Payload(), m.ID())
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func payloads(ms []apulsar.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Payload())
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// eventuallyWithin bounds every testwait.Eventually of these tests.
const eventuallyWithin = 10 * time.Second

// createPartitionedREST creates public/default/name with n partitions through the admin REST API:
// PUT /admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions with the count as body (the pulsaradmin
// package would need dependencies this module does not carry).
func createPartitionedREST(t *testing.T, admin, name string, n int) {
	t.Helper()
	url := fmt.Sprintf("%s/admin/v2/persistent/public/default/%s/partitions", strings.TrimRight(admin, "/"), name)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url, strings.NewReader(strconv.Itoa(n)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := adminHTTP(t).Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Less(t, resp.StatusCode, 300, "create partitioned topic: %s", resp.Status)
}

// listSubscriptionsREST returns the subscriptions of public/default/name through the admin REST API:
// GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/subscriptions.
func listSubscriptionsREST(t *testing.T, admin, name string) []string {
	t.Helper()
	url := fmt.Sprintf("%s/admin/v2/persistent/public/default/%s/subscriptions", strings.TrimRight(admin, "/"), name)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, http.NoBody)
	require.NoError(t, err)
	resp, err := adminHTTP(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "list subscriptions: %s", resp.Status)
	var subs []string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&subs))
	slices.Sort(subs)
	return subs
}

// adminHTTP returns the HTTP client for admin REST calls: its own transport, whose keep-alive connections are
// closed when t ends. The process-wide default client would keep them, with two goroutines each, for as long
// as the server keeps them open; a real broker outlives the test run, so goleak failed the package after every
// test had passed. Every admin call of the tests goes through here (TestAdminHTTPLeavesNoConnections).
func adminHTTP(t *testing.T) *http.Client {
	t.Helper()
	return brokertest.HTTPClient(t)
}
