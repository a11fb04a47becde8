package bqotel_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
)

// goCoreTraceID is the Go core's rule, as its otel helper documents TraceIDOf, written out
// independently of TraceIDFrom: a trace_id whose hyphens removed leave 32 hex digits maps to
// those 16 bytes unless they are all zero; anything else maps to the first 16 bytes of its
// SHA-256.
func goCoreTraceID(traceID string) string {
	h := strings.ReplaceAll(traceID, "-", "")
	if raw, err := hex.DecodeString(h); err == nil && len(raw) == 16 && strings.Trim(h, "0") != "" {
		return hex.EncodeToString(raw)
	}
	sum := sha256.Sum256([]byte(traceID))
	return hex.EncodeToString(sum[:16])
}

func TestTraceIDFrom(t *testing.T) {
	t.Parallel()
	hashed := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:16])
	}
	for in, want := range map[string]string{
		"4bf92f35-77b3-4da6-a3ce-929d0e0e4736": "4bf92f3577b34da6a3ce929d0e0e4736",
		"4BF92F35-77B3-4DA6-A3CE-929D0E0E4736": "4bf92f3577b34da6a3ce929d0e0e4736",
		"4bf92f3577b34da6a3ce929d0e0e4736":     "4bf92f3577b34da6a3ce929d0e0e4736",
		"4bf9-2f3577b34da6a3ce929d0e0e4736":    "4bf92f3577b34da6a3ce929d0e0e4736", // hyphens anywhere, as the Go core strips them
		"00000000-0000-0000-0000-000000000000": hashed("00000000-0000-0000-0000-000000000000"),
		"00000000000000000000000000000000":     hashed("00000000000000000000000000000000"),
		"4bf92f35-77b3-4da6-a3ce-929d0e0e473":  hashed("4bf92f35-77b3-4da6-a3ce-929d0e0e473"), // one digit short
		"4bf92f35x77b3-4da6-a3ce-929d0e0e4736": hashed("4bf92f35x77b3-4da6-a3ce-929d0e0e4736"),
		"4bf92f35-77b3-4da6-a3ce-929d0e0e473g": hashed("4bf92f35-77b3-4da6-a3ce-929d0e0e473g"),
		"order-123":                            hashed("order-123"),
		" ":                                    hashed(" "),
	} {
		id, ok := bqotel.TraceIDFrom(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, id.String(), in)
		assert.Equal(t, goCoreTraceID(in), id.String(), "the Go core's rule: %q", in)
	}
	_, ok := bqotel.TraceIDFrom("")
	assert.False(t, ok, "an empty trace_id names no trace")
}

func FuzzTraceIDFrom(f *testing.F) {
	f.Add("4bf92f35-77b3-4da6-a3ce-929d0e0e4736")
	f.Add("4bf92f3577b34da6a3ce929d0e0e4736")
	f.Add("00000000-0000-0000-0000-000000000000")
	f.Add("-4bf92f3577b34da6a3ce929d0e0e4736-")
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := bqotel.TraceIDFrom(s)
		if s == "" {
			if ok {
				t.Fatal("an empty trace_id named a trace")
			}
			return
		}
		if !ok || !id.IsValid() {
			t.Fatalf("%q named no valid trace: %s %v", s, id, ok)
		}
		if got, want := id.String(), goCoreTraceID(s); got != want {
			t.Fatalf("%q gave %s, the Go core's rule %s", s, got, want)
		}
	})
}
