package envelope_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

func TestIsBlank(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", " ", "\t", "\n", "\v", "\f", "\r", " \t\n\v\f\r "} {
		assert.True(t, envelope.IsBlank(s), "%q", s)
	}
	for _, s := range []string{"x", " x ", "\u00a0", "\u0085", "\u3000", "\uFEFF", "\x00", "\x1c", "\u2028"} {
		assert.False(t, envelope.IsBlank(s), "%q", s)
	}
}

func TestURN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, payload, want string
	}{
		{"job", `{"job":"urn:a"}`, "urn:a"},
		{"job trimmed", `{"job":" \turn:a\r\n"}`, "urn:a"},
		{"urn alias", `{"urn":"urn:b"}`, "urn:b"},
		{"urn alias trimmed", `{"job":"  ","urn":"\furn:b\u000b"}`, "urn:b"},
		{"job wins", `{"job":"urn:a","urn":"urn:b"}`, "urn:a"},
		{"none", `{}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := envelope.Decode([]byte(tt.payload))
			require.NoError(t, err)
			assert.Equal(t, tt.want, e.URN())
		})
	}
}

func TestBind(t *testing.T) {
	t.Parallel()
	e, err := envelope.Classify([]byte(`{"job":"u","trace_id":"t","data":{"order_id":9007199254740993,"note":"x","r":1.0},"meta":{"schema_version":1}}`))
	require.NoError(t, err)

	var typed struct {
		OrderID int64  `json:"order_id"`
		Note    string `json:"note"`
	}
	require.NoError(t, e.Bind(&typed))
	assert.Equal(t, int64(9007199254740993), typed.OrderID)
	assert.Equal(t, "x", typed.Note)

	var loose map[string]any
	require.NoError(t, e.Bind(&loose))
	assert.Equal(t, json.Number("9007199254740993"), loose["order_id"])
	assert.Equal(t, json.Number("1.0"), loose["r"])

	var wrong struct {
		OrderID string `json:"order_id"`
	}
	err = e.Bind(&wrong)
	require.Error(t, err)
	assert.Regexp(t, `^envelope: bind data: `, err.Error())

	require.Error(t, e.Bind(nil), "a nil target is an error, not a panic")

	e.Data = nil
	var empty map[string]any
	require.NoError(t, e.Bind(&empty))
	assert.Empty(t, empty)

	e.Data = json.RawMessage(`{} {}`)
	require.ErrorIs(t, e.Bind(&empty), envelope.ErrInvalidData)
}

func TestCloneIsDeep(t *testing.T) {
	t.Parallel()
	e, err := envelope.Decode(body(`,"timestamp":1,"x":1,"meta":{"schema_version":1,"y":2},"dead_letter":{"error":"e","exception":"x","z":3}`))
	require.NoError(t, err)
	want, err := e.Encode()
	require.NoError(t, err)

	c := e.Clone()
	got, err := c.Encode()
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	assert.Equal(t, e.Warnings(), c.Warnings())

	c.Data[0] = 'Z'
	*c.DeadLetter.Error = "changed"
	*c.DeadLetter.Exception = "changed"
	c.DeadLetter.Reason = "changed"
	c.Meta.ID = "changed"
	c.Warnings()[0].Pointer = "changed"
	after, err := e.Encode()
	require.NoError(t, err)
	assert.Equal(t, string(want), string(after), "the original is untouched")
	assert.Equal(t, "/timestamp", e.Warnings()[0].Pointer)
}

func TestWithAttemptsAndWithoutDeadLetter(t *testing.T) {
	t.Parallel()
	e, err := envelope.Decode(body(`,"attempts":2,"dead_letter":{"reason":"failed"},"x":{"k":1.0}`))
	require.NoError(t, err)

	n := e.WithAttempts(3)
	assert.Equal(t, 3, n.Attempts)
	assert.Equal(t, 2, e.Attempts)
	assert.Equal(t, 0, e.WithAttempts(-1).Attempts)

	r := e.WithoutDeadLetter()
	assert.Nil(t, r.DeadLetter)
	assert.NotNil(t, e.DeadLetter)
	out, err := r.Encode()
	require.NoError(t, err)
	assert.NotContains(t, string(out), "dead_letter")
	assert.Contains(t, string(out), `,"x":{"k":1.0}}`)
}
