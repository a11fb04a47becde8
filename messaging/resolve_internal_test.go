package messaging

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// levenshtein ranks the keys an unresolved environment variable is closest to.
func TestLevenshtein(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"abc", "abc", 0},
		{"kitten", "sitting", 3},
		{"flaw", "lawn", 2},
		{"ab", "ba", 2},
		{"MP_MESSAGING_INCOMING_C_CONNECTOR", "MP_MESSAGING_INCOMING_A_CONNECTOR", 1},
		{"MP_MESSAGING_INCOMING_A_CONECTOR", "MP_MESSAGING_INCOMING_A_CONNECTOR", 1},
	} {
		assert.Equal(t, tc.want, levenshtein(tc.a, tc.b), "%q %q", tc.a, tc.b)
	}
}
