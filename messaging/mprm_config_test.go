package messaging_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
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

// aliased is the in-memory connector declaring one more attribute, with an alias.
type aliased struct{ *inmemory.Connector }

func (a aliased) Attributes() []messaging.Attribute {
	return append(a.Connector.Attributes(), messaging.Attribute{Name: "batch", Alias: "batch-size", Type: messaging.AttrInt})
}

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
	long := strings.Repeat("x", 100_000) // beyond bufio.Scanner's default 64 KiB line
	text := strings.NewReplacer("<TAB>", "\t", "<FF>", "\f", "<LONG>", long).Replace(`
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
m.n<TAB>= tab before the separator
o.p<FF>: form feed before the separator
q.r = ends with \u0042
s.t = <LONG>
u.v = continued at the end of the file \`)
	src := messaging.FromProperties("app", strings.NewReader(text))
	cfg, err := messaging.LoadConfig(src)
	require.NoError(t, err)
	want := map[string]string{
		"a.b": "1", "c.d": "2", "e.f": "3", "g.h": "multi line", "i.j": "escA\t=:\\", "k.l": "second",
		"m.n": "tab before the separator", "o.p": "form feed before the separator", "q.r": "ends with B",
		"s.t": long, "u.v": "continued at the end of the file ",
	}
	for k, w := range want {
		v, ok := cfg.Get(k)
		assert.True(t, ok, k)
		assert.Equal(t, w, v, k)
	}
	assert.ElementsMatch(t, slices.Collect(maps.Keys(want)), cfg.Keys(), "no other key")
	assert.Equal(t, []string{`app: line 11: key "k.l" repeated, the last value wins`}, cfg.Warnings(),
		"a repeated key warns, with the line of the value that wins")
}

// A malformed properties source is an error of LoadConfig that names the source
// and the line where the faulty logical line starts.
func TestConfig_PropertiesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"invalid UTF-8", "a=1\nb=\xff", "messaging: config app: line 2: invalid UTF-8"},
		{"short \\u escape", "a=1\n\nb=\\u004", `messaging: config app: line 3: short \u escape in "\\u004"`},
		{"bad \\u escape", "a=1\nb=\\u00zz", `messaging: config app: line 2: bad \u escape in "\\u00zz"`},
		{"bad escape continued to the end of the file", "a=1\nb=x\\\n\\uzzzz\\", `messaging: config app: line 2: bad \u escape in "x\\uzzzz"`},
		{"line longer than 1 MiB", "a=" + strings.Repeat("x", 1<<20), "messaging: config app: read: bufio.Scanner: token too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := messaging.LoadConfig(messaging.FromProperties("app", strings.NewReader(tc.text)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
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

// enabled=false makes the runtime ignore a channel's configuration: the channel
// is internal, and its connector is never asked for it.
func TestConfig_EnabledFalseIgnoresTheChannel(t *testing.T) {
	for _, enabled := range []string{"false", "true"} {
		rt, conn := newRuntime(t, map[string]string{
			"mp.messaging.incoming.a.connector": "in-memory",
			"mp.messaging.incoming.a.enabled":   enabled,
		})
		messaging.NewEmitter[[]byte](rt, "a")
		messaging.Consume(rt, "a", nop[[]byte])
		err := startErr(t, rt)
		if enabled == "false" {
			require.NoError(t, err)
			assert.Empty(t, conn.Configs())
			continue
		}
		assert.Equal(t, map[messaging.ProblemKind]int{messaging.MultipleUpstreams: 1}, kinds(t, err),
			"enabled=true: the connector and the emitter both feed the channel")
	}
}

func TestConfig_EnvResolution(t *testing.T) {
	t.Run("unique", func(t *testing.T) {
		conn := inmemory.New()
		cfg, err := messaging.LoadConfig(messaging.FromEnvVars([]string{
			"MP_MESSAGING_INCOMING_ORDERS_AZ09Z_CONNECTOR=in-memory", // the bounds of every class of kept characters
			"MP_MESSAGING_CONNECTOR_IN_MEMORY_MAX_INFLIGHT=5",
			"UNRELATED=1",
		}))
		require.NoError(t, err)
		err = startWith(t, cfg, func(rt *messaging.Runtime) { messaging.Consume(rt, "orders-AZ09z", nop[[]byte]) }, conn)
		require.NoError(t, err)
		v, _ := conn.Configs()[0].Lookup(inmemory.AttrMaxInflight)
		assert.Equal(t, "5", v)
	})
	t.Run("alias", func(t *testing.T) {
		conn := aliased{inmemory.New()}
		cfg, err := messaging.LoadConfig(messaging.FromEnvVars([]string{
			"MP_MESSAGING_INCOMING_A_CONNECTOR=in-memory",
			"MP_MESSAGING_INCOMING_A_BATCH_SIZE=7",
		}))
		require.NoError(t, err)
		err = startWith(t, cfg, func(rt *messaging.Runtime) { messaging.Consume(rt, "a", nop[[]byte]) }, conn)
		require.NoError(t, err)
		c := conn.Configs()[0]
		v, _ := c.Lookup("batch")
		assert.Equal(t, "7", v, "a variable naming an alias sets its attribute")
		for _, attr := range []string{"batch", messaging.AttrConnector} {
			assert.Equal(t, "channel (env)", c.Origin(attr), attr)
		}
	})
	t.Run("a variable named like the key beats its upper-case form", func(t *testing.T) {
		// MicroProfile Config's order, whichever the variables' order: the
		// upper-case form sorts first.
		conn := inmemory.New()
		cfg, err := messaging.LoadConfig(messaging.FromEnvVars([]string{
			"MP_MESSAGING_INCOMING_A_CONNECTOR=in-memory",
			"MP_MESSAGING_INCOMING_A_MAX_INFLIGHT=5",
			"mp.messaging.incoming.a.max-inflight=7",
			"BABELQUEUE_MESSAGING_STRICT=true",
			"babelqueue.messaging.strict=false",
			"MP_MESSAGING_INCOMING_NOWHERE_TOPIC=x", // an error only if strict
		}))
		require.NoError(t, err)
		err = startWith(t, cfg, func(rt *messaging.Runtime) { messaging.Consume(rt, "a", nop[[]byte]) }, conn)
		require.NoError(t, err)
		v, _ := conn.Configs()[0].Lookup(inmemory.AttrMaxInflight)
		assert.Equal(t, "7", v)
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
		for _, strict := range []string{"", "BABELQUEUE_MESSAGING_STRICT=true", "babelqueue.messaging.strict=true"} {
			env := []string{"MP_MESSAGING_INCOMING_C_CONNECTOR=x"}
			if strict != "" {
				env = append(env, strict)
			}
			cfg, err := messaging.LoadConfig(messaging.FromEnvVars(env))
			require.NoError(t, err)
			err = startWith(t, cfg, func(rt *messaging.Runtime) {
				for _, ch := range []string{"b", "a"} {
					messaging.NewEmitter[string](rt, ch)
					messaging.Consume(rt, ch, nop[string])
				}
			}, inmemory.New())
			if strict == "" {
				require.NoError(t, err)
				continue
			}
			require.ErrorIs(t, err, messaging.ErrUnresolvedEnvKey, strict)
			assert.Contains(t, err.Error(), "(closest: mp.messaging.incoming.a.connector)",
				"of the keys one edit away, the first in the order of their variable names")
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
