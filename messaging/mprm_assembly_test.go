package messaging_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

func kinds(t *testing.T, err error) map[messaging.ProblemKind]int {
	t.Helper()
	var ae *messaging.AssemblyError
	require.ErrorAs(t, err, &ae)
	out := map[messaging.ProblemKind]int{}
	for _, p := range ae.Problems {
		out[p.Kind]++
	}
	return out
}

func nop[T any](context.Context, T) error                { return nil }
func id[T any](_ context.Context, v T) (T, error)        { return v, nil }
func startErr(t *testing.T, rt *messaging.Runtime) error { t.Helper(); return rt.Start(testCtx(t)) }

func TestMPRM_MissingConnectorTest(t *testing.T) {
	rt, _ := newRuntime(t, map[string]string{"mp.messaging.incoming.x.connector": "nope"})
	messaging.Consume(rt, "x", nop[string])
	messaging.Process(rt, "nobody", "y", id[string])
	messaging.Consume(rt, "y", nop[string])
	k := kinds(t, startErr(t, rt))
	assert.Equal(t, 1, k[messaging.UnknownConnector])
	assert.GreaterOrEqual(t, k[messaging.NoUpstream], 1)
}

// TestMPRM_InvalidConfigurationTest ports the 16 deployments in one table; each
// deployment has exactly one problem.
func TestMPRM_InvalidConfigurationTest(t *testing.T) {
	type tc struct {
		name  string
		props map[string]string
		build func(rt *messaging.Runtime)
		want  messaging.ProblemKind
	}
	cases := []tc{
		{"blank consumer channel", nil, func(rt *messaging.Runtime) { messaging.Consume(rt, " ", nop[string]) }, messaging.InvalidChannelName},
		{"dotted channel", nil, func(rt *messaging.Runtime) { messaging.Consume(rt, "a.b", nop[string]) }, messaging.InvalidChannelName},
		{"blank emitter channel", nil, func(rt *messaging.Runtime) { messaging.NewEmitter[string](rt, "") }, messaging.InvalidChannelName},
		{"incomplete chain", nil, func(rt *messaging.Runtime) {
			messaging.Process(rt, "a", "b", id[string])
			messaging.Consume(rt, "b", nop[string])
		}, messaging.NoUpstream},
		{"processor without downstream", nil, func(rt *messaging.Runtime) {
			messaging.NewEmitter[string](rt, "a")
			messaging.Process(rt, "a", "b", id[string])
		}, messaging.NoDownstream},
		{"producer without downstream", nil, func(rt *messaging.Runtime) {
			messaging.Generate(rt, "a", func(context.Context) (string, error) { return "", nil })
		}, messaging.NoDownstream},
		{"two producers without downstream", nil, func(rt *messaging.Runtime) {
			messaging.NewEmitter[string](rt, "a")
			messaging.NewEmitter[string](rt, "a")
		}, messaging.NoDownstream},
		{"incoming connector without downstream", map[string]string{"mp.messaging.incoming.a.connector": "in-memory"}, func(*messaging.Runtime) {}, messaging.NoDownstream},
		{"outgoing connector without upstream", map[string]string{"mp.messaging.outgoing.a.connector": "in-memory"}, func(*messaging.Runtime) {}, messaging.NoUpstream},
		{"two upstreams of a processor", nil, func(rt *messaging.Runtime) {
			messaging.NewEmitter[string](rt, "a")
			messaging.NewEmitter[string](rt, "a")
			messaging.Process(rt, "a", "b", id[string])
			messaging.Consume(rt, "b", nop[string])
		}, messaging.MultipleUpstreams},
		{"two upstreams of an outgoing connector", map[string]string{"mp.messaging.outgoing.a.connector": "in-memory"}, func(rt *messaging.Runtime) {
			messaging.NewEmitter[[]byte](rt, "a")
			messaging.NewEmitter[[]byte](rt, "a")
		}, messaging.MultipleUpstreams},
		{"two downstreams of an emitter", nil, func(rt *messaging.Runtime) {
			messaging.NewEmitter[string](rt, "a")
			messaging.Consume(rt, "a", nop[string])
			messaging.Consume(rt, "a", nop[string])
		}, messaging.MultipleDownstreams},
		{"two Channel on one name", nil, func(rt *messaging.Runtime) {
			messaging.NewEmitter[string](rt, "a")
			messaging.Channel[string](rt, "a")
			messaging.Channel[string](rt, "a")
		}, messaging.MultipleDownstreams},
		{"incoming connector consumed twice", map[string]string{"mp.messaging.incoming.a.connector": "in-memory"}, func(rt *messaging.Runtime) {
			messaging.Consume(rt, "a", nop[[]byte])
			messaging.Consume(rt, "a", nop[[]byte])
		}, messaging.MultipleDownstreams},
		{"processor reads its output", nil, func(rt *messaging.Runtime) {
			messaging.Process(rt, "a", "a", id[string])
		}, messaging.SelfLoop},
		{"processor cycle", nil, func(rt *messaging.Runtime) {
			messaging.Process(rt, "a", "b", id[string])
			messaging.Process(rt, "b", "a", id[string])
		}, messaging.SelfLoop},
		{"type mismatch", nil, func(rt *messaging.Runtime) {
			messaging.NewEmitter[string](rt, "a")
			messaging.Consume(rt, "a", nop[int])
		}, messaging.TypeMismatch},
		{"missing codec", map[string]string{"mp.messaging.incoming.a.connector": "in-memory"}, func(rt *messaging.Runtime) {
			messaging.Consume(rt, "a", nop[struct{ X int }])
		}, messaging.MissingCodec},
		{"unknown codec", map[string]string{"mp.messaging.incoming.a.connector": "in-memory", "mp.messaging.incoming.a.codec": "avro"}, func(rt *messaging.Runtime) {
			messaging.Consume(rt, "a", nop[struct{ X int }])
		}, messaging.MissingCodec},
		{"codec does not support the type", map[string]string{"mp.messaging.incoming.a.connector": "in-memory", "mp.messaging.incoming.a.codec": "string"}, func(rt *messaging.Runtime) {
			messaging.Consume(rt, "a", nop[int])
		}, messaging.TypeMismatch},
		{"channel without connector", map[string]string{"mp.messaging.incoming.a.max-inflight": "3"}, func(rt *messaging.Runtime) {
			messaging.NewEmitter[[]byte](rt, "a")
			messaging.Consume(rt, "a", nop[[]byte])
		}, messaging.MissingAttribute},
		{"invalid attribute", map[string]string{"mp.messaging.incoming.a.connector": "in-memory", "mp.messaging.incoming.a.max-inflight": "many"}, func(rt *messaging.Runtime) {
			messaging.Consume(rt, "a", nop[[]byte])
		}, messaging.InvalidAttribute},
		{"connector rejects a value", map[string]string{"mp.messaging.incoming.a.connector": "in-memory", "mp.messaging.incoming.a.max-inflight": "0"}, func(rt *messaging.Runtime) {
			messaging.Consume(rt, "a", nop[[]byte])
		}, messaging.InvalidAttribute},
		{"strict unknown attribute", map[string]string{"mp.messaging.incoming.a.connector": "in-memory", "mp.messaging.incoming.a.colour": "red", messaging.KeyStrict: "true"}, func(rt *messaging.Runtime) {
			messaging.Consume(rt, "a", nop[[]byte])
		}, messaging.UnknownAttribute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt, _ := newRuntime(t, tc.props)
			tc.build(rt)
			err := startErr(t, rt)
			assert.Equal(t, map[messaging.ProblemKind]int{tc.want: 1}, kinds(t, err), "want only %v in %v", tc.want, err)
			require.ErrorIs(t, err, tc.want.Sentinel())
			var p *messaging.Problem
			require.ErrorAs(t, err, &p)
		})
	}
}

func TestMPRM_UnknownAttributeIsAWarning(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.a.connector": "in-memory", "mp.messaging.incoming.a.colour": "red"})
	messaging.Consume(rt, "a", nop[[]byte])
	start(t, rt)
	_, ok := conn.Configs()[0].Lookup("colour")
	assert.False(t, ok, "undeclared attributes are not passed to the connector")
}

func TestMPRM_AllProblemsTogether(t *testing.T) {
	rt, _ := newRuntime(t, map[string]string{"mp.messaging.outgoing.o.connector": "missing"})
	messaging.Consume(rt, "", nop[string])
	messaging.Process(rt, "p", "p", id[string], messaging.WithAck(messaging.AckManual))
	messaging.NewEmitter[string](rt, "t")
	messaging.Consume(rt, "t", nop[int])
	messaging.Generate(rt, "dangling", func(context.Context) (string, error) { return "", nil })
	err := startErr(t, rt)
	k := kinds(t, err)
	for _, want := range []messaging.ProblemKind{
		messaging.InvalidChannelName, messaging.SelfLoop, messaging.InvalidAckStrategy,
		messaging.TypeMismatch, messaging.NoDownstream, messaging.UnknownConnector,
	} {
		assert.Positive(t, k[want], "missing %v in %v", want, err)
		require.ErrorIs(t, err, want.Sentinel())
	}
	require.ErrorIs(t, rt.Start(testCtx(t)), messaging.ErrClosed, "a failed runtime cannot be restarted")
}

func TestMPRM_ChannelInjectionTest(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	messaging.Produce(rt, "a", reactive.FromSlice(messaging.NewMessage("x"), messaging.NewMessage("y")))
	ch := messaging.Channel[string](rt, "a")
	out, errc := reactive.ToChan(t.Context(), reactive.Map(ch, func(m messaging.Message[string]) (string, error) { return m.Payload(), nil }), 4)
	start(t, rt)
	var got []string
	for v := range out {
		got = append(got, v)
	}
	require.NoError(t, <-errc)
	assert.Equal(t, []string{"x", "y"}, got)
}

func TestMPRM_MergedInput(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	messaging.Produce(rt, "a", reactive.FromSlice(messaging.NewMessage("1"), messaging.NewMessage("2")))
	messaging.Generate(rt, "a", func() func(context.Context) (string, error) {
		n := 0
		return func(context.Context) (string, error) {
			n++
			if n > 2 {
				return "", errEOF
			}
			return "g", nil
		}
	}())
	got := make(chan string, 8)
	messaging.Consume(rt, "a", func(_ context.Context, p string) error { got <- p; return nil }, messaging.WithMerge())
	start(t, rt)
	var vs []string
	for range 4 {
		vs = append(vs, <-got)
	}
	assert.ElementsMatch(t, []string{"1", "2", "g", "g"}, vs)
}

var errEOF = fmt.Errorf("generator done: %w", io.EOF)

// A processor cycle is reported once, naming the processors of the cycle in the
// order of the flow, and only them.
func TestMPRM_CycleNamesItsProcessors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edges [][2]string // in, out of each processor
		want  string
	}{
		{"cycle", [][2]string{{"a", "b"}, {"b", "c"}, {"c", "a"}}, "a→b, b→c, c→a"},
		{"cycle entered from outside", [][2]string{{"a", "b"}, {"b", "c"}, {"c", "d"}, {"d", "b"}}, "b→c, c→d, d→b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, _ := newRuntime(t, nil)
			if tc.edges[0][0] != tc.edges[len(tc.edges)-1][1] {
				messaging.NewEmitter[string](rt, tc.edges[0][0])
			}
			for _, e := range tc.edges { // merging: a cycle entered from outside has two upstreams
				messaging.Process(rt, e[0], e[1], id[string], messaging.WithName(e[0]+"→"+e[1]), messaging.WithMerge())
			}
			err := startErr(t, rt)
			assert.Equal(t, map[messaging.ProblemKind]int{messaging.SelfLoop: 1}, kinds(t, err))
			var p *messaging.Problem
			require.ErrorAs(t, err, &p)
			assert.Equal(t, tc.want, p.Stage)
		})
	}
}

// An ack strategy a stage cannot take is reported on the stage's channel: its
// input's, or its output's for a stage without input.
func TestMPRM_InvalidAckStrategyNamesTheChannel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(rt *messaging.Runtime)
		want  string
	}{
		{"not allowed for the shape", func(rt *messaging.Runtime) {
			messaging.NewEmitter[string](rt, "in")
			messaging.Consume(rt, "in", nop[string], messaging.WithAck(messaging.AckManual))
		}, "in"},
		{"given to a stage without input", func(rt *messaging.Runtime) {
			messaging.Generate(rt, "out", func(context.Context) (string, error) { return "", nil }, messaging.WithAck(messaging.AckPost))
			messaging.Consume(rt, "out", nop[string])
		}, "out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, _ := newRuntime(t, nil)
			tc.build(rt)
			err := startErr(t, rt)
			assert.Equal(t, map[messaging.ProblemKind]int{messaging.InvalidAckStrategy: 1}, kinds(t, err))
			var p *messaging.Problem
			require.ErrorAs(t, err, &p)
			assert.Equal(t, tc.want, p.Channel)
		})
	}
}
