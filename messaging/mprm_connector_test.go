package messaging_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
)

func TestMPRM_ConnectorTest(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{
		"mp.messaging.connector.in-memory.max-inflight": "7",
		"mp.messaging.connector.in-memory.window":       "4",
		"mp.messaging.incoming.src.connector":           "in-memory",
		"mp.messaging.outgoing.dst.connector":           "in-memory",
		"mp.messaging.outgoing.dst.window":              "2",
	})
	messaging.Process(rt, "src", "dst", func(_ context.Context, p string) (string, error) { return strings.ToUpper(p), nil })
	start(t, rt)
	cfgs := conn.Configs()
	require.Len(t, cfgs, 2)
	byName := map[string]messaging.ChannelConfig{}
	for _, c := range cfgs {
		byName[c.Channel()] = c
		v, _ := c.Lookup(messaging.AttrChannelName)
		assert.Equal(t, c.Channel(), v)
		v, _ = c.Lookup(messaging.AttrConnector)
		assert.Equal(t, inmemory.Name, v)
	}
	v, _ := byName["src"].Lookup(inmemory.AttrMaxInflight)
	assert.Equal(t, "7", v, "connector-level default")
	assert.Contains(t, byName["src"].Origin(inmemory.AttrMaxInflight), "connector")
	v, _ = byName["dst"].Lookup(inmemory.AttrWindow)
	assert.Equal(t, "2", v, "channel beats connector")
	_, ok := byName["dst"].Lookup(inmemory.AttrMaxInflight)
	assert.False(t, ok, "only the attributes of the direction")

	for _, p := range []string{"a", "b", "c"} {
		conn.Source("src").SendString(p)
	}
	require.NoError(t, conn.Sink("dst").Wait(testCtx(t), 3))
	assert.Equal(t, []string{"A", "B", "C"}, conn.Sink("dst").Payloads())
	require.NoError(t, conn.Source("src").WaitSettled(testCtx(t), 3))
	a, n := conn.Source("src").Counts()
	assert.Equal(t, 3, a)
	assert.Zero(t, n)
}
