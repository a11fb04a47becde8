package pulsar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

type fixedHealth bqpulsar.Health

func (f fixedHealth) Health() bqpulsar.Health { return bqpulsar.Health(f) }

type probeBody struct {
	Status string `json:"status"`
	Checks []struct {
		Name    string   `json:"name"`
		Status  string   `json:"status"`
		Live    bool     `json:"live"`
		Ready   bool     `json:"ready"`
		Reasons []string `json:"reasons"`
	} `json:"checks"`
}

func probe(t *testing.T, h http.Handler, method, path string) (int, probeBody, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), method, path, nil))
	var body probeBody
	if rec.Code == http.StatusOK || rec.Code == http.StatusServiceUnavailable {
		if method != http.MethodHead {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
		}
	}
	return rec.Code, body, rec.Header()
}

func TestHealthHandlerProbes(t *testing.T) {
	t.Parallel()
	up := fixedHealth{Live: true, Ready: true}
	notReady := fixedHealth{Live: true, Reasons: []string{"receive failing: connection refused"}}
	dead := fixedHealth{Reasons: []string{"stopped"}}

	h := bqpulsar.HealthHandler(bqpulsar.NamedHealthCheck("billing", up), notReady)
	code, body, hdr := probe(t, h, http.MethodGet, "/live")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	assert.Equal(t, "UP", body.Status)
	require.Len(t, body.Checks, 2)
	assert.Equal(t, "billing", body.Checks[0].Name)
	assert.Equal(t, "check-2", body.Checks[1].Name)
	assert.Equal(t, "UP", body.Checks[1].Status, "live, though not ready")

	code, body, _ = probe(t, h, http.MethodGet, "/health/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "DOWN", body.Status)
	assert.Equal(t, "UP", body.Checks[0].Status)
	assert.Equal(t, "DOWN", body.Checks[1].Status)
	assert.False(t, body.Checks[1].Ready)
	assert.Equal(t, []string{"receive failing: connection refused"}, body.Checks[1].Reasons)

	code, body, _ = probe(t, bqpulsar.HealthHandler(up, dead), http.MethodGet, "/live/")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, []string{"stopped"}, body.Checks[1].Reasons)

	code, _, _ = probe(t, h, http.MethodHead, "/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	code, _, _ = probe(t, bqpulsar.HealthHandler(), http.MethodGet, "/ready")
	assert.Equal(t, http.StatusOK, code, "no checks: nothing is down")
}

func TestHealthHandlerRefusals(t *testing.T) {
	t.Parallel()
	h := bqpulsar.HealthHandler(fixedHealth{Live: true, Ready: true})
	code, _, _ := probe(t, h, http.MethodGet, "/metrics")
	assert.Equal(t, http.StatusNotFound, code)
	code, _, hdr := probe(t, h, http.MethodPost, "/ready")
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	assert.Equal(t, "GET, HEAD", hdr.Get("Allow"))

	// A nil check is a wiring mistake: it shows as down rather than as a panic.
	code, body, _ := probe(t, bqpulsar.HealthHandler(nil), http.MethodGet, "/live")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, []string{"nil health checker"}, body.Checks[0].Reasons)
}

func TestHealthHandlerOverARealConsumer(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	c, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(uniqueTopic(t, "health")),
		bqpulsar.WithSubscription("probe", apulsar.Shared),
		bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }))
	require.NoError(t, err)
	h := bqpulsar.HealthHandler(bqpulsar.NamedHealthCheck("probe", c))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	code, body, _ := probe(t, h, http.MethodGet, "/ready")
	assert.Equal(t, http.StatusOK, code, "%+v", body)
	code, _, _ = probe(t, h, http.MethodGet, "/live")
	assert.Equal(t, http.StatusOK, code)

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, c.Close())
	code, body, _ = probe(t, h, http.MethodGet, "/live")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	require.Len(t, body.Checks, 1)
	assert.False(t, body.Checks[0].Live)
	assert.NotEmpty(t, body.Checks[0].Reasons)
	code, _, _ = probe(t, h, http.MethodGet, "/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
}

func ExampleHealthHandler() {
	// A consumer is a HealthChecker; here, one that has lost its broker connection.
	var consumer bqpulsar.HealthChecker = fixedHealth{Live: true, Reasons: []string{"receive failing: connection refused"}}
	mux := http.NewServeMux()
	mux.Handle("/health/", bqpulsar.HealthHandler(bqpulsar.NamedHealthCheck("billing", consumer)))

	for _, path := range []string{"/health/live", "/health/ready"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil))
		fmt.Print(path, " ", rec.Code, " ", rec.Body.String())
	}
	// Output:
	// /health/live 200 {"status":"UP","checks":[{"name":"billing","status":"UP","live":true,"ready":false,"reasons":["receive failing: connection refused"]}]}
	// /health/ready 503 {"status":"DOWN","checks":[{"name":"billing","status":"DOWN","live":true,"ready":false,"reasons":["receive failing: connection refused"]}]}
}
