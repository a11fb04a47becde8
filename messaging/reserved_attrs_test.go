package messaging_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
)

// The reserved attributes reach every connector whether or not it declares them, and
// NewChannelConfig gives a connector what the runtime would.
func TestReservedAttributesReachTheConnector(t *testing.T) {
	channelAttrs := map[messaging.Direction]map[string]string{
		messaging.Incoming: {"connector": inmemory.Name, "codec": "string", "health-enabled": "false", "bogus": "x"},
		messaging.Outgoing: {"connector": inmemory.Name, "codec": "string", "merge": "true", inmemory.AttrWindow: "2", "bogus": "y"},
	}
	props := map[string]string{}
	for k, v := range channelAttrs[messaging.Incoming] {
		props["mp.messaging.incoming.src."+k] = v
	}
	for k, v := range channelAttrs[messaging.Outgoing] {
		props["mp.messaging.outgoing.dst."+k] = v
	}
	rt, conn := newRuntime(t, props)
	messaging.Process(rt, "src", "dst", func(_ context.Context, p string) (string, error) { return p, nil })
	start(t, rt)
	cfgs := conn.Configs()
	require.Len(t, cfgs, 2)
	for _, c := range cfgs {
		v, ok := c.Lookup(messaging.AttrCodec)
		assert.True(t, ok, "codec reaches %s", c.Channel())
		assert.Equal(t, "string", v)
		for _, n := range []string{messaging.AttrConnector, messaging.AttrChannelName, messaging.AttrEnabled, messaging.AttrHealthEnabled} {
			_, ok := c.Lookup(n)
			assert.True(t, ok, "%s reaches %s", n, c.Channel())
		}
		_, ok = c.Lookup("bogus")
		assert.False(t, ok, "an undeclared attribute does not")
		_, ok = c.Lookup(messaging.AttrMerge)
		assert.Equal(t, c.Direction() == messaging.Outgoing, ok, "merge is outgoing only")
		if c.Direction() == messaging.Incoming {
			v, _ = c.Lookup(messaging.AttrHealthEnabled)
			assert.Equal(t, "false", v)
		} else {
			v, _ = c.Lookup(messaging.AttrMerge)
			assert.Equal(t, "true", v)
		}

		// NewChannelConfig gives the same attributes and values.
		nc := messaging.NewChannelConfig(c.Channel(), inmemory.Name, c.Direction(), channelAttrs[c.Direction()], conn.Attributes())
		require.Equal(t, c.Keys(), nc.Keys(), "channel %s", c.Channel())
		for _, k := range c.Keys() {
			want, _ := c.Lookup(k)
			got, _ := nc.Lookup(k)
			assert.Equal(t, want, got, "attribute %s of %s", k, c.Channel())
		}
		assert.Equal(t, c.Channel(), nc.Channel())
		assert.Equal(t, c.Connector(), nc.Connector())
		assert.Equal(t, c.Direction(), nc.Direction())
	}
}

func TestNewChannelConfig_LikeTheResolver(t *testing.T) {
	decl := []messaging.Attribute{
		{Name: "size", Alias: "sz", Type: messaging.AttrInt, Default: "4"},
		{Name: "in-only", Type: messaging.AttrString, Default: "d", Directions: []messaging.Direction{messaging.Incoming}},
	}
	c := messaging.NewChannelConfig("out", "conn", messaging.Outgoing, map[string]string{"sz": "9", "in-only": "x", "other": "y"}, decl)
	assert.Equal(t, []string{"channel-name", "connector", "enabled", "health-enabled", "merge", "size"}, c.Keys(),
		"declared for the direction plus reserved; undeclared ones dropped")
	n, err := messaging.Attr[int](c, "size")
	require.NoError(t, err)
	assert.Equal(t, 9, n, "an alias sets its attribute")
	assert.Equal(t, "channel", c.Origin("size"))
	assert.Equal(t, "default", c.Origin(messaging.AttrHealthEnabled))
	v, _ := c.Lookup(messaging.AttrConnector)
	assert.Equal(t, "conn", v)
	_, ok := c.Lookup(messaging.AttrCodec)
	assert.False(t, ok, "codec has no default")
}
