package messaging_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
)

// A Problem describes itself on one line with only the fields it has, and
// unwraps to its kind's sentinel and its cause.
func TestProblem_ErrorAndUnwrap(t *testing.T) {
	cause := errors.New("cause")
	for _, tc := range []struct {
		name   string
		p      messaging.Problem
		want   string
		unwrap []error
	}{
		{"every field", messaging.Problem{
			Kind: messaging.MissingCodec, Channel: "a", Connector: "in-memory", Attribute: "codec", Stage: "Consume(a) at app.go:7", Err: cause,
		}, `MissingCodec channel "a" connector "in-memory" attribute "codec" stage Consume(a) at app.go:7: cause`, []error{messaging.ErrMissingCodec, cause}},
		{"kind only", messaging.Problem{Kind: messaging.NoUpstream}, "NoUpstream", []error{messaging.ErrNoUpstream}},
		{"no kind", messaging.Problem{Err: cause}, "ProblemKind(0): cause", []error{cause}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.p.Error())
			assert.Equal(t, tc.unwrap, tc.p.Unwrap())
		})
	}
}

func TestAssemblyError_ErrorAndHas(t *testing.T) {
	e := &messaging.AssemblyError{
		Problems: []*messaging.Problem{{Kind: messaging.NoUpstream, Channel: "a"}, {Kind: messaging.SelfLoop, Channel: "b"}},
		Warnings: []*messaging.Problem{{Kind: messaging.UnknownAttribute, Attribute: "colour"}},
	}
	assert.Equal(t, "messaging: assembly failed with 2 problem(s)\n  NoUpstream channel \"a\"\n  SelfLoop channel \"b\"", e.Error())
	assert.True(t, e.Has(messaging.NoUpstream))
	assert.True(t, e.Has(messaging.SelfLoop))
	assert.False(t, e.Has(messaging.UnknownAttribute), "a warning is not a problem")
	assert.ErrorIs(t, e, messaging.ErrSelfLoop)
}
