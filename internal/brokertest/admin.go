package brokertest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Admin REST helpers that work the same on the embedded broker's admin subset and on a real
// Apache Pulsar: the dual-target tests force trims and check read-only operations through
// them, not through Go methods of pulsartest.Broker.

// HTTPClient returns an HTTP client for admin calls with its own transport, whose keep-alive
// connections are closed when the test ends. The process-wide default client keeps them, with
// two goroutines each, for as long as the server does; a real broker outlives the test run,
// so goleak would fail the package after every test passed.
func HTTPClient(tb testing.TB) *http.Client {
	tb.Helper()
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		tb.Fatalf("brokertest: http.DefaultTransport is a %T, not an *http.Transport", http.DefaultTransport)
	}
	tr := base.Clone()
	// After CloseIdleConnections the transport also closes connections that become idle later.
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// AdminDo sends one admin request (body "" for none) and returns the status code and body.
func AdminDo(tb testing.TB, method, rawURL, body string) (int, []byte) {
	tb.Helper()
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(tb.Context(), method, rawURL, rd)
	if err != nil {
		tb.Fatalf("brokertest: %s %s: %v", method, rawURL, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := HTTPClient(tb).Do(req)
	if err != nil {
		tb.Fatalf("brokertest: %s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("brokertest: %s %s: read body: %v", method, rawURL, err)
	}
	return resp.StatusCode, b
}

// TopicURL is the admin URL of a persistent topic: admin + "/admin/v2/persistent/tenant/
// namespace/name", for "persistent://tenant/namespace/name", "tenant/namespace/name" or a
// short name in public/default.
func TopicURL(admin, topic string) string {
	rest := strings.TrimPrefix(topic, "persistent://")
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		parts = []string{"public", "default", rest}
	}
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.TrimRight(admin, "/") + "/admin/v2/persistent/" + strings.Join(parts, "/")
}

// ForceTrim makes the broker delete now what it may delete of each topic (every partition of
// a partitioned one): the entries that no durable subscription needs and the retention
// policy does not keep. It unloads the topic (PUT …/unload), which on Pulsar closes the
// ledger being written, since a trim never deletes that one, and then trims it (POST
// …/trim; on Pulsar the call loads the topic again, with a new ledger). Clients reconnect
// by themselves. The same two calls drive the embedded broker (Broker.Trim).
//
// On Pulsar an unload can lose an acknowledgement that the broker is still persisting (the
// subscription then delivers that message again), which the embedded broker never does:
// force a trim on topics whose consumers' last acknowledgements the test does not count on,
// or some time after them.
func ForceTrim(tb testing.TB, admin string, topics ...string) {
	tb.Helper()
	for _, topic := range topics {
		expectStatus(tb, http.MethodPut, TopicURL(admin, topic)+"/unload", "unload "+topic)
		expectStatus(tb, http.MethodPost, TopicURL(admin, topic)+"/trim", "trim "+topic)
	}
}

// expectStatus sends a body-less request until it answers 204, retrying while the broker
// answers 5xx (a topic that is being unloaded or loaded again), for up to WaitLong.
func expectStatus(tb testing.TB, method, rawURL, what string) {
	tb.Helper()
	deadline := time.Now().Add(WaitLong)
	for {
		code, body := AdminDo(tb, method, rawURL, "")
		switch {
		case code == http.StatusNoContent || code == http.StatusOK:
			return
		case code >= 500 && time.Now().Before(deadline):
			select {
			case <-tb.Context().Done():
				tb.Fatalf("brokertest: %s: HTTP %d: %s (the test ended)", what, code, body)
			case <-time.After(100 * time.Millisecond):
			}
		default:
			tb.Fatalf("brokertest: %s: HTTP %d: %s", what, code, body)
		}
	}
}

// SubscriptionStats is the part of a subscription's admin stats that the tests compare.
type SubscriptionStats struct {
	Backlog   int64 // msgBacklog
	Unacked   int64 // unackedMessages: delivered to a consumer, not acknowledged
	Consumers int
	Durable   bool
}

// TopicStats is the part of a topic's admin stats (GET …/stats) that the tests use.
type TopicStats struct {
	StorageSize   int64 // bytes stored, what a trim frees
	Subscriptions map[string]SubscriptionStats
}

// Stats returns the topic's admin stats; ok is false when the topic does not exist (404).
func Stats(tb testing.TB, admin, topic string) (st TopicStats, ok bool) {
	tb.Helper()
	code, body := AdminDo(tb, http.MethodGet, TopicURL(admin, topic)+"/stats", "")
	if code == http.StatusNotFound {
		return TopicStats{}, false
	}
	if code != http.StatusOK {
		tb.Fatalf("brokertest: stats of %s: HTTP %d: %s", topic, code, body)
	}
	var raw struct {
		StorageSize   int64 `json:"storageSize"`
		Subscriptions map[string]struct {
			MsgBacklog      int64             `json:"msgBacklog"`
			UnackedMessages int64             `json:"unackedMessages"`
			IsDurable       bool              `json:"isDurable"`
			Consumers       []json.RawMessage `json:"consumers"`
		} `json:"subscriptions"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		tb.Fatalf("brokertest: stats of %s: %v: %s", topic, err, body)
	}
	st = TopicStats{StorageSize: raw.StorageSize, Subscriptions: map[string]SubscriptionStats{}}
	for name, s := range raw.Subscriptions {
		st.Subscriptions[name] = SubscriptionStats{
			Backlog: s.MsgBacklog, Unacked: s.UnackedMessages, Consumers: len(s.Consumers), Durable: s.IsDurable,
		}
	}
	return st, true
}

// Backlog returns a subscription's msgBacklog, failing the test when the topic or the
// subscription does not exist.
func Backlog(tb testing.TB, admin, topic, sub string) int64 {
	tb.Helper()
	st, ok := Stats(tb, admin, topic)
	if !ok {
		tb.Fatalf("brokertest: backlog of %s on %s: no such topic", sub, topic)
	}
	s, ok := st.Subscriptions[sub]
	if !ok {
		tb.Fatalf("brokertest: backlog of %s on %s: no such subscription", sub, topic)
	}
	return s.Backlog
}

// Subscriptions returns the sorted subscription names of a topic (GET …/subscriptions); none
// when the topic does not exist.
func Subscriptions(tb testing.TB, admin, topic string) []string {
	tb.Helper()
	code, body := AdminDo(tb, http.MethodGet, TopicURL(admin, topic)+"/subscriptions", "")
	if code == http.StatusNotFound {
		return nil
	}
	if code != http.StatusOK {
		tb.Fatalf("brokertest: subscriptions of %s: HTTP %d: %s", topic, code, body)
	}
	var subs []string
	if err := json.Unmarshal(body, &subs); err != nil {
		tb.Fatalf("brokertest: subscriptions of %s: %v: %s", topic, err, body)
	}
	slices.Sort(subs)
	return subs
}

// CreatePartitioned creates a partitioned topic with n partitions (PUT …/partitions).
func CreatePartitioned(tb testing.TB, admin, topic string, n int) {
	tb.Helper()
	code, body := AdminDo(tb, http.MethodPut, TopicURL(admin, topic)+"/partitions", strconv.Itoa(n))
	if code >= 300 {
		tb.Fatalf("brokertest: create %s with %d partitions: HTTP %d: %s", topic, n, code, body)
	}
}

// Topics returns the sorted persistent topics of public/default whose names start with
// prefix (partitions, not partitioned names). A real broker holds the topics of other tests
// and earlier runs too; a test's own topics share the prefix Target.Topic gave them.
func Topics(tb testing.TB, admin, prefix string) []string {
	tb.Helper()
	u := strings.TrimRight(admin, "/") + "/admin/v2/persistent/public/default"
	code, body := AdminDo(tb, http.MethodGet, u, "")
	if code != http.StatusOK {
		tb.Fatalf("brokertest: topics of public/default: HTTP %d: %s", code, body)
	}
	var all []string
	if err := json.Unmarshal(body, &all); err != nil {
		tb.Fatalf("brokertest: topics of public/default: %v: %s", err, body)
	}
	var out []string
	for _, t := range all {
		if strings.HasPrefix(t, prefix) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// State is what a read-only operation must leave as it was, as the admin API shows it: the
// topics with a prefix and, for each, its subscriptions with their backlog, unacknowledged
// count and consumers.
type State struct {
	Topics []string
	Subs   map[string]map[string]SubscriptionStats
}

// StateOf returns the State of the topics of public/default that start with prefix.
func StateOf(tb testing.TB, admin, prefix string) State {
	tb.Helper()
	st := State{Topics: Topics(tb, admin, prefix), Subs: map[string]map[string]SubscriptionStats{}}
	for _, topic := range st.Topics {
		ts, _ := Stats(tb, admin, topic)
		st.Subs[topic] = ts.Subscriptions
	}
	return st
}
