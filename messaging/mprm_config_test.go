package messaging_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
)

// dotted is a connector whose name contains dots, for the longest-match rule.
type dotted struct {
	*inmemory.Connector
	name string
}

func (d dotted) Name() string { return d.name }

func startWith(t *testing.T, cfg messaging.Config, build func(rt *messaging.Runtime), conns ...messaging.Connector) error {
	t.Helper()
	opts := make([]messaging.Option, 0, len(conns))
	for _, c := range conns {
		opts = append(opts, messaging.WithConnector(c))
	}
	rt := messaging.New(cfg, opts...)
	build(rt)
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	return rt.Start(testCtx(t))
}

func TestConfig_PropertiesSyntax(t *testing.T) {
	src := messaging.FromProperties("app", strings.NewReader(`
# comment
! also a comment
a.b = 1
c.d:2
e.f 3
g.h = multi \
      line
i.j = esc\u0041\t\=\:\\
k.l = first
k.l = second
`))
	cfg, err := messaging.LoadConfig(src)
	require.NoError(t, err)
	for k, want := range map[string]string{"a.b": "1", "c.d": "2", "e.f": "3", "g.h": "multi line", "i.j": "escA\t=:\\", "k.l": "second"} {
		v, ok := cfg.Get(k)
		assert.True(t, ok, k)
		assert.Equal(t, want, v, k)
	}
	require.Len(t, cfg.Warnings(), 1, "a repeated key warns")
}

func TestConfig_OrdinalsAndOptional(t *testing.T) {
	cfg, err := messaging.LoadConfig(
		messaging.FromProperties("file", strings.NewReader("k=file\nonly.file=f")),
		messaging.FromMap(map[string]string{"k": "map"}),
		messaging.WithOrdinal(messaging.FromMap(map[string]string{"k": "high"}), 500),
		messaging.Optional(messaging.FromPropertiesFile("/nonexistent/app.properties")),
	)
	require.NoError(t, err)
	v, _ := cfg.Get("k")
	assert.Equal(t, "high", v)
	v, _ = cfg.Get("only.file")
	assert.Equal(t, "f", v)
	_, err = messaging.LoadConfig(messaging.FromPropertiesFile("/nonexistent/app.properties"))
	require.Error(t, err)
	cfg, err = messaging.LoadConfig(messaging.FromMap(map[string]string{"k": "a"}), messaging.FromMap(map[string]string{"k": "b"}))
	require.NoError(t, err)
	v, _ = cfg.Get("k")
	assert.Equal(t, "b", v, "equal ordinals: the later source wins")
}

func TestConfig_ChannelBeatsConnectorAcrossOrdinalsAndLongestMatch(t *testing.T) {
	short := dotted{inmemory.New(), "mem"}
	long := dotted{inmemory.New(), "mem.fast"}
	cfg, err := messaging.LoadConfig(
		messaging.FromProperties("file", strings.NewReader("mp.messaging.incoming.a.connector=mem.fast\nmp.messaging.incoming.a.max-inflight=3")),
		messaging.FromEnvVars([]string{"mp.messaging.connector.mem.fast.max-inflight=9"}),
	)
	require.NoError(t, err)
	err = startWith(t, cfg, func(rt *messaging.Runtime) { messaging.Consume(rt, "a", nop[[]byte]) }, short, long)
	require.NoError(t, err)
	require.Len(t, long.Configs(), 1, "the longest connector name wins")
	require.Empty(t, short.Configs())
	v, _ := long.Configs()[0].Lookup(inmemory.AttrMaxInflight)
	assert.Equal(t, "3", v, "a channel key in the file beats a connector key in the env")
}

func TestConfig_EnvResolution(t *testing.T) {
	t.Run("unique", func(t *testing.T) {
		conn := inmemory.New()
		cfg, err := messaging.LoadConfig(messaging.FromEnvVars([]string{
			"MP_MESSAGING_INCOMING_ORDERS_IN_CONNECTOR=in-memory",
			"MP_MESSAGING_CONNECTOR_IN_MEMORY_MAX_INFLIGHT=5",
			"UNRELATED=1",
		}))
		require.NoError(t, err)
		err = startWith(t, cfg, func(rt *messaging.Runtime) { messaging.Consume(rt, "orders-in", nop[[]byte]) }, conn)
		require.NoError(t, err)
		v, _ := conn.Configs()[0].Lookup(inmemory.AttrMaxInflight)
		assert.Equal(t, "5", v)
	})
	t.Run("ambiguous", func(t *testing.T) {
		cfg, err := messaging.LoadConfig(messaging.FromEnvVars([]string{"MP_MESSAGING_INCOMING_ORDERS_IN_CONNECTOR=in-memory"}))
		require.NoError(t, err)
		err = startWith(t, cfg, func(rt *messaging.Runtime) {
			messaging.NewEmitter[string](rt, "orders-in")
			messaging.Consume(rt, "orders-in", nop[string])
			messaging.NewEmitter[string](rt, "orders_in")
			messaging.Consume(rt, "orders_in", nop[string])
		}, inmemory.New())
		require.ErrorIs(t, err, messaging.ErrUnresolvedEnvKey)
		assert.Contains(t, err.Error(), "mp.messaging.incoming.orders-in.connector")
		assert.Contains(t, err.Error(), "mp.messaging.incoming.orders_in.connector")
	})
	t.Run("unresolved warns, strict fails", func(t *testing.T) {
		for _, strict := range []bool{false, true} {
			env := []string{"MP_MESSAGING_INCOMING_NOWHERE_TOPIC=x"}
			if strict {
				env = append(env, "BABELQUEUE_MESSAGING_STRICT=true")
			}
			cfg, err := messaging.LoadConfig(messaging.FromEnvVars(env))
			require.NoError(t, err)
			err = startWith(t, cfg, func(rt *messaging.Runtime) {
				messaging.NewEmitter[string](rt, "a")
				messaging.Consume(rt, "a", nop[string])
			}, inmemory.New())
			if strict {
				require.ErrorIs(t, err, messaging.ErrUnresolvedEnvKey)
			} else {
				require.NoError(t, err)
			}
		}
	})
}

func TestHealth_ChannelsAndHandlers(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	messaging.Consume(rt, "in", nop[[]byte])
	em := messaging.NewEmitter[string](rt, "internal")
	messaging.Consume(rt, "internal", nop[string])
	assert.False(t, rt.Health().Started)
	start(t, rt)
	_ = em
	h := rt.Health()
	assert.True(t, h.Started)
	assert.True(t, h.Ready)
	assert.True(t, h.Live)
	require.Len(t, h.Channels, 2)
	rec := httptest.NewRecorder()
	rt.HealthHandler(messaging.ProbeLive).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health/live", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), `"status":"UP"`)

	conn.Source("in").Fail(errBoom) // a failed stream is not live
	testwait.Eventually(t, waitTimeout, func() bool { return !rt.Health().Live }, "not live")
	rec = httptest.NewRecorder()
	rt.HealthHandler(messaging.ProbeLive).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health/live", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), `"in":"DOWN"`)

	require.NoError(t, rt.Shutdown(testCtx(t)))
	assert.False(t, rt.Health().Ready, "readiness drops at shutdown")
}

func TestRun_ChannelFailureAndCancel(t *testing.T) {
	t.Run("failure", func(t *testing.T) {
		rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
		messaging.Consume(rt, "in", nop[[]byte])
		done := make(chan error, 1)
		go func() { done <- rt.Run(t.Context()) }()
		testwait.Eventually(t, waitTimeout, func() bool { return rt.Health().Started }, "started")
		conn.Source("in").Fail(errBoom)
		require.ErrorIs(t, <-done, messaging.ErrChannelFailed)
	})
	t.Run("cancel", func(t *testing.T) {
		rt, _ := newRuntime(t, map[string]string{messaging.KeyShutdownTimeout: "2s"})
		em := messaging.NewEmitter[string](rt, "a")
		messaging.Consume(rt, "a", nop[string])
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- rt.Run(ctx) }()
		testwait.Eventually(t, waitTimeout, func() bool { return rt.Health().Started }, "started")
		require.NoError(t, em.Send(testCtx(t), "x"))
		cancel()
		require.NoError(t, <-done)
	})
}
