package binding_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
)

func TestProject(t *testing.T) {
	t.Parallel()
	env, err := envelope.Decode([]byte(`{"job":"urn:babel:orders:created","trace_id":"t-1","data":{},` +
		`"meta":{"id":"m-1","queue":"orders","schema_version":1,"lang":"go","created_at":1796601600},"attempts":3}`))
	require.NoError(t, err)
	props := map[string]string{"kept": "yes", binding.Job: "replaced"}
	binding.Project(props, env)
	assert.Equal(t, map[string]string{
		"kept":              "yes",
		"bq-job":            "urn:babel:orders:created",
		"bq-trace-id":       "t-1",
		"bq-message-id":     "m-1",
		"bq-schema-version": "1",
		"bq-source-lang":    "go",
		"bq-attempts":       "3",
	}, props)

	props = map[string]string{}
	binding.Project(props, env.WithAttempts(-2))
	assert.Equal(t, "0", props[binding.Attempts], "a negative count is projected as 0")
}

func TestRoutedJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		props map[string]string
		want  string
		ok    bool
	}{
		{"absent", map[string]string{"other": "urn:x"}, "", false},
		{"nil map", nil, "", false},
		{"empty", map[string]string{"bq-job": ""}, "", false},
		{"blank", map[string]string{"bq-job": " \t\r\n"}, "", false},
		{"usable", map[string]string{"bq-job": "urn:babel:a:b"}, "urn:babel:a:b", true},
		{"kept as sent, spaces and all", map[string]string{"bq-job": " urn:babel:a:b "}, " urn:babel:a:b ", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := binding.RoutedJob(tc.props)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.ok, ok)
		})
	}
}

func TestIsProperty(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"bq-job", "bq-trace-id", "bq-message-id", "bq-schema-version", "bq-source-lang", "bq-attempts", "bq-delay"} {
		assert.True(t, binding.IsProperty(k), k)
	}
	for _, k := range []string{"", "bq-", "bq-other", "BQ-JOB", "bq-job ", "traceparent"} {
		assert.False(t, binding.IsProperty(k), k)
	}
}
