package pulsar_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

func TestParseAttempts(t *testing.T) {
	t.Parallel()
	valid := map[string]int{
		"0": 0, "3": 3, "007": 7, "2147483647": 2147483647, "00000000000000000002147483647": 2147483647,
	}
	for in, want := range valid {
		got, ok := bqpulsar.ParseAttempts(in)
		assert.True(t, ok, "%q should be valid", in)
		assert.Equal(t, want, got, "%q", in)
	}
	for _, in := range []string{
		"", "+3", "-1", " 3", "3 ", "3\n", "1e2", "3.0", "0x10", "٣", "３", "2147483648",
		"99999999999999999999", "\u00a03", "1_000",
	} {
		got, ok := bqpulsar.ParseAttempts(in)
		assert.False(t, ok, "%q should be invalid", in)
		assert.Zero(t, got, "%q", in)
	}
}

func TestGateVerdict(t *testing.T) {
	t.Parallel()
	pass := []struct {
		value   string
		present bool
	}{
		{"", false},
		{"2", false},
		{"1", true},
		{"", true},
		{" ", true},
		{" \t", true},
		{"\n\v\f\r", true},
	}
	for _, c := range pass {
		require.NoError(t, bqpulsar.GateVerdict(c.value, c.present), "%q present=%v", c.value, c.present)
	}
	for _, v := range []string{
		"2", "01", "x", " 1", "1 ", "\t1\n", "\u00a0", "\u0085", "\u3000", "\ufeff", "\u00a01",
		"1\u3000", "1.0", "+1",
	} {
		err := bqpulsar.GateVerdict(v, true)
		require.Error(t, err, "%q must be rejected", v)
		require.ErrorIs(t, err, bqpulsar.ErrSchemaVersion)
		var sv *bqpulsar.SchemaVersionError
		require.ErrorAs(t, err, &sv)
		assert.Equal(t, v, sv.Value, "the value is reported untrimmed")
		assert.Contains(t, err.Error(), strconv.Quote(v))
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	const maxInt32 = 2147483647
	cases := []struct {
		name                string
		prop                string
		present             bool
		body                int
		rc                  uint32
		reconciled, counted int
	}{
		{"first delivery", "", false, 0, 0, 0, 1},
		{"redelivery count maps without -1", "", false, 0, 2, 2, 3},
		{"body never lowered", "", false, 5, 1, 5, 6},
		{"valid property beats body", "4", true, 1, 0, 4, 5},
		{"property may be lower than body", "1", true, 5, 0, 1, 2},
		{"invalid property falls back to body", "+4", true, 2, 0, 2, 3},
		{"blank property falls back to body", " ", true, 2, 0, 2, 3},
		{"redelivery count beats property", "1", true, 0, 3, 3, 4},
		{"negative body is clamped", "", false, -7, 0, 0, 1},
		{"saturates at int32", "2147483647", true, 0, 0, maxInt32, maxInt32},
		{"huge redelivery count saturates", "", false, 0, 4294967295, maxInt32, maxInt32},
		{"one below the bound", "2147483646", true, 0, 0, 2147483646, maxInt32},
	}
	for _, c := range cases {
		r, n := bqpulsar.Reconcile(c.prop, c.present, c.body, c.rc)
		assert.Equal(t, c.reconciled, r, c.name)
		assert.Equal(t, c.counted, n, c.name)
	}
}

func TestProjectProperties(t *testing.T) {
	t.Parallel()
	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"order_id": 1},
		envelope.WithQueue("orders"))
	require.NoError(t, err)
	env = env.WithAttempts(2)
	props := bqpulsar.ProjectProperties(env)
	assert.Equal(t, map[string]string{
		"bq-job":            "urn:babel:orders:created",
		"bq-trace-id":       env.TraceID,
		"bq-message-id":     env.Meta.ID,
		"bq-schema-version": "1",
		"bq-source-lang":    "go",
		"bq-attempts":       "2",
	}, props)
	props["x"] = "y"
	assert.Len(t, bqpulsar.ProjectProperties(env), 6, "every call returns a fresh map")
}

func FuzzParseAttempts(f *testing.F) {
	for _, s := range []string{"0", "3", "007", "+3", "-1", " 3", "2147483647", "2147483648", "٣", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := bqpulsar.ParseAttempts(s)
		allDigits := s != ""
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				allDigits = false
			}
		}
		if !allDigits {
			if ok {
				t.Fatalf("%q accepted but is not made of ASCII digits", s)
			}
			return
		}
		// Only digits: valid exactly when the value fits in int32.
		v, err := strconv.ParseUint(s, 10, 64)
		fits := err == nil && v <= 2147483647
		if ok != fits {
			t.Fatalf("%q: ok=%v, want %v", s, ok, fits)
		}
		if ok && uint64(n) != v {
			t.Fatalf("%q: got %d, want %d", s, n, v)
		}
	})
}

func FuzzGateVerdict(f *testing.F) {
	for _, s := range []string{"1", "", " ", "\t\n\v\f\r", "2", "01", " 1", "\u00a0", "\ufeff", "1\u3000"} {
		f.Add(s, true)
	}
	f.Add("2", false)
	f.Fuzz(func(t *testing.T, s string, present bool) {
		err := bqpulsar.GateVerdict(s, present)
		want := !present || s == "1" || envelope.IsBlank(s)
		if (err == nil) != want {
			t.Fatalf("GateVerdict(%q, %v) = %v, want pass=%v", s, present, err, want)
		}
		if err != nil && !errors.Is(err, bqpulsar.ErrSchemaVersion) {
			t.Fatalf("rejection %v does not match ErrSchemaVersion", err)
		}
		if err == nil && present && s != "1" {
			// Everything that passes besides "1" must be made of the six ASCII blanks only.
			for i := 0; i < len(s); i++ {
				switch s[i] {
				case ' ', '\t', '\n', '\v', '\f', '\r':
				default:
					t.Fatalf("%q passed the gate but holds %q", s, s[i])
				}
			}
		}
	})
}
