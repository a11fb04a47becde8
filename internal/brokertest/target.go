package brokertest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The environment of the real-broker halves of the dual-target tests.
const (
	// EnvURL is the service URL of a real Apache Pulsar, e.g. pulsar://127.0.0.1:6650.
	EnvURL = "PULSAR_URL"
	// EnvAdminURL is its admin REST (web service) base URL, e.g. http://127.0.0.1:8080.
	EnvAdminURL = "PULSAR_ADMIN_URL"
	// EnvRequired, set to 1, turns a real-broker subtest that cannot run into a failure
	// instead of a skip: a CI step that started a real broker must not pass on skips.
	EnvRequired = "REAL_PULSAR_REQUIRED"
)

// Target is a broker a dual-target test runs against: the embedded one (pulsartest) or a
// real Apache Pulsar.
type Target struct {
	// Name is the subtest name: "embedded" or "real".
	Name string
	// URL is the binary protocol's service URL.
	URL string
	// AdminURL is the admin REST base URL ("http://host:port"); "" on a real broker without
	// PULSAR_ADMIN_URL. Tests that need it call Admin.
	AdminURL string
	// Broker is the embedded broker, for its embedded-only fault hooks and inspection; nil on
	// a real broker.
	Broker *pulsartest.Broker
}

// Real reports whether the target is a real Apache Pulsar.
func (tg *Target) Real() bool { return tg.Broker == nil }

// Admin returns the admin REST base URL, or ends the test as Unavailable when a real broker
// runs without PULSAR_ADMIN_URL.
func (tg *Target) Admin(tb testing.TB) string {
	tb.Helper()
	if tg.AdminURL == "" {
		Unavailable(tb, EnvAdminURL+" is not set: this test needs the real broker's admin REST API")
	}
	return tg.AdminURL
}

// Client returns a client of the target (see NewClient), closed when the test ends.
func (tg *Target) Client(tb testing.TB) apulsar.Client {
	tb.Helper()
	return NewClient(tb, tg.URL)
}

// TxnClient returns a client of the target with transactions enabled (see NewTxnClient),
// closed when the test ends.
func (tg *Target) TxnClient(tb testing.TB) apulsar.Client {
	tb.Helper()
	return NewTxnClient(tb, tg.URL)
}

// Topic returns a fresh fully qualified topic name in public/default. Unlike UniqueTopic it
// is also unique across test runs, since a real broker keeps the topics of earlier runs. No
// such name is a prefix of another one (Topics and StateOf select a test's topics by prefix),
// apart from the names made from it, such as name+".dlq" or name+"-partition-0".
func (*Target) Topic(tb testing.TB, base string) string {
	tb.Helper()
	name := strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(strings.ToLower(tb.Name()))
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return fmt.Sprintf("persistent://public/default/%s-%d-%s-%s", base, topicSeq.Add(1), name, runID)
}

// runID tells this process's topics apart from those earlier runs left on a real broker.
var runID = func() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}()

// Each runs body as parallel subtests, one per target: "embedded" on a fresh embedded broker
// with its admin REST subset (and opts), always; "real" on the broker of PULSAR_URL, or
// ended by Unavailable when PULSAR_URL is not set. The same body, the same assertions.
//
// Each does not make t itself parallel; the caller decides.
func Each(t *testing.T, body func(t *testing.T, tg *Target), opts ...pulsartest.Option) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		body(t, Embedded(t, opts...))
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		body(t, RealBroker(t))
	})
}

// Embedded starts an embedded broker with the admin REST subset on a loopback port (and
// opts), closed when the test ends (a failed Close fails the test), and returns it as a
// Target.
func Embedded(tb testing.TB, opts ...pulsartest.Option) *Target {
	tb.Helper()
	opts = append([]pulsartest.Option{pulsartest.WithAdminHTTP("127.0.0.1:0")}, opts...)
	b, err := pulsartest.Start(tb.Context(), opts...)
	if err != nil {
		tb.Fatalf("brokertest: start an embedded broker: %v", err)
	}
	tb.Cleanup(func() {
		if err := b.Close(); err != nil {
			tb.Errorf("brokertest: close the embedded broker: %v", err)
		}
	})
	return &Target{Name: "embedded", URL: b.URL(), AdminURL: b.AdminURL(), Broker: b}
}

// RealBroker returns the real broker of PULSAR_URL (with PULSAR_ADMIN_URL, if set), or ends
// the test as Unavailable.
func RealBroker(tb testing.TB) *Target {
	tb.Helper()
	url, admin := RealURLs(tb)
	return &Target{Name: "real", URL: url, AdminURL: admin}
}

// RealURLs returns PULSAR_URL and PULSAR_ADMIN_URL (which may be empty), or ends the test as
// Unavailable when PULSAR_URL is not set.
func RealURLs(tb testing.TB) (url, admin string) {
	tb.Helper()
	url = os.Getenv(EnvURL)
	if url == "" {
		Unavailable(tb, EnvURL+" is not set: this half runs against a real Apache Pulsar only "+
			"(tools/pulsar/start.sh starts one)")
	}
	return url, os.Getenv(EnvAdminURL)
}

// Unavailable ends a real-broker test that cannot run, for reason: it skips, unless
// REAL_PULSAR_REQUIRED=1, where it fails. This is the one place of that rule: plain
// `go test ./...` (CI=true or not) needs nothing but Go and skips the real halves, while a
// CI step that started a real broker and set REAL_PULSAR_REQUIRED=1 fails when they could
// not run.
func Unavailable(tb testing.TB, reason string) {
	tb.Helper()
	if os.Getenv(EnvRequired) == "1" {
		tb.Fatalf("%s=1, but %s", EnvRequired, reason)
	}
	tb.Skip(reason)
}
