package bqotel_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
)

func TestTraceIDFrom(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"4bf92f35-77b3-4da6-a3ce-929d0e0e4736": "4bf92f3577b34da6a3ce929d0e0e4736",
		"4BF92F35-77B3-4DA6-A3CE-929D0E0E4736": "4bf92f3577b34da6a3ce929d0e0e4736",
		"4bf92f3577b34da6a3ce929d0e0e4736":     "4bf92f3577b34da6a3ce929d0e0e4736",
		"00000000-0000-0000-0000-000000000000": "", // the nil UUID names no trace
		"00000000000000000000000000000000":     "",
		"4bf92f35-77b3-4da6-a3ce-929d0e0e473":  "", // one digit short
		"4bf92f35x77b3-4da6-a3ce-929d0e0e4736": "", // not a hyphen
		"4bf92f35-77b3-4da6-a3ce-929d0e0e473g": "", // not hex
		"order-123":                            "",
		"":                                     "",
	} {
		id, ok := bqotel.TraceIDFrom(in)
		assert.Equal(t, want != "", ok, in)
		if ok {
			assert.Equal(t, want, id.String(), in)
		}
	}
}

func FuzzTraceIDFrom(f *testing.F) {
	f.Add("4bf92f35-77b3-4da6-a3ce-929d0e0e4736")
	f.Add("4bf92f3577b34da6a3ce929d0e0e4736")
	f.Add("00000000-0000-0000-0000-000000000000")
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := bqotel.TraceIDFrom(s)
		if !ok {
			return
		}
		// Whatever is accepted is a valid trace id whose hex digits are the input's, in
		// lower case, with the hyphens of a UUID removed.
		if !id.IsValid() {
			t.Fatalf("%q gave the invalid trace id %s", s, id)
		}
		if got, want := id.String(), strings.ToLower(strings.ReplaceAll(s, "-", "")); got != want {
			t.Fatalf("%q gave %s, want %s", s, got, want)
		}
	})
}
