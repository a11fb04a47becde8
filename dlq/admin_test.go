package dlq_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// TestAdminTokenIsSentAsBearer runs against the embedded broker only: it needs a broker whose
// admin API requires a token, which the real target of these tests does not. The embedded
// admin API, like Pulsar's with token authentication, accepts only "Authorization: Bearer
// <a token it can verify>": with WithAdminToken the Admin reads the topic's subscriptions,
// without it, or with a token of another key, the broker answers 401.
func TestAdminTokenIsSentAsBearer(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	tg := brokertest.Embedded(t, pulsartest.WithAuth(pulsartest.Auth{TokenSecret: secret}))
	token := pulsartest.SignToken(secret, `{"sub":"ops"}`)
	topic := tg.Topic(t, "auth") + ".dlq"

	// The broker requires the token of its clients too: subscribe with it, so that the topic
	// has a subscription to read.
	client, err := apulsar.NewClient(apulsar.ClientOptions{
		URL: tg.URL, Authentication: apulsar.NewAuthenticationToken(token),
		OperationTimeout: 5 * time.Second, Logger: bqpulsar.NewClientLogger(nil),
	})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	require.NoError(t, dlq.EnsureSubscription(t.Context(), client, topic, dlq.DefaultSubscription))

	admin := func(opts ...dlq.AdminOption) *dlq.Admin {
		a, err := dlq.NewAdmin(tg.AdminURL, append([]dlq.AdminOption{dlq.WithHTTPClient(brokertest.HTTPClient(t))}, opts...)...)
		require.NoError(t, err)
		return a
	}
	subs, found, err := admin(dlq.WithAdminToken(token)).Subscriptions(t.Context(), topic)
	require.NoError(t, err, "the token is sent as Bearer")
	assert.True(t, found)
	assert.Equal(t, []string{dlq.DefaultSubscription}, subs)

	other := pulsartest.SignToken([]byte("another secret, another secret!!"), `{"sub":"ops"}`)
	for name, a := range map[string]*dlq.Admin{"no token": admin(), "a token of another key": admin(dlq.WithAdminToken(other))} {
		_, _, err := a.Subscriptions(t.Context(), topic)
		require.ErrorIs(t, err, dlq.ErrAdmin, name)
		assert.Contains(t, err.Error(), "HTTP 401", name)
	}
}

// TestAdminErrorsSayTheBrokersReason: an HTTP error answer is an error wrapping ErrAdmin that
// names the status and the broker's reason: the "reason" of a JSON body, else the body's
// text, else nothing more.
func TestAdminErrorsSayTheBrokersReason(t *testing.T) {
	t.Parallel()
	answers := map[string]struct {
		status     int
		body, want string
	}{
		"json":    {http.StatusInternalServerError, `{"reason":"Policies not found"}`, "HTTP 500: Policies not found"},
		"other":   {http.StatusInternalServerError, `{"code":7}`, `HTTP 500: {"code":7}`},
		"text":    {http.StatusServiceUnavailable, " broker starting\n", "HTTP 503: broker starting"},
		"nothing": {http.StatusForbidden, "", "HTTP 403"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[strings.Split(r.URL.Path, "/")[6]] // /admin/v2/persistent/public/default/<topic>/partitions
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	a, err := dlq.NewAdmin(srv.URL)
	require.NoError(t, err)
	for topic, want := range answers {
		_, err := a.Partitions(t.Context(), topic)
		require.ErrorIs(t, err, dlq.ErrAdmin, topic)
		assert.True(t, strings.HasSuffix(err.Error(), want.want), "%s: %q ends in %q", topic, err, want.want)
	}
}
