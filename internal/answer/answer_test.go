package answer_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/answer"
)

func TestParse(t *testing.T) {
	cases := []struct {
		err           error
		name, message string
		ok            bool
	}{
		{errors.New("server error: ServiceNotReady: Topic is temporarily unavailable"), "ServiceNotReady", "Topic is temporarily unavailable", true},
		// GetLastMessageIDs: the client's own wrapping, and the errors.Join of its retry's deadline.
		{fmt.Errorf("failed to getLastMessageID due to %w", errors.Join(errors.New("context deadline exceeded"),
			errors.New("server error: MetadataError: Consumer not found"))), "MetadataError", "Consumer not found", true},
		{errors.New("server error: MetadataError: Consumer not found\nnext line"), "MetadataError", "Consumer not found", true},
		{errors.New("server error: Not A Name: x"), "", "", false},
		{errors.New("server error: " + strings.Repeat("A", 65) + ": x"), "", "", false},
		{errors.New("server error: NoColon"), "", "", false},
		{errors.New("connection refused"), "", "", false},
		{nil, "", "", false},
	}
	for _, c := range cases {
		name, message, ok := answer.Parse(c.err)
		assert.Equal(t, c.ok, ok, "%v", c.err)
		assert.Equal(t, c.name, name, "%v", c.err)
		assert.Equal(t, c.message, message, "%v", c.err)
	}
}

// FuzzParse: any text gives either no answer, or a name of letters only and a message of one line.
func FuzzParse(f *testing.F) {
	f.Add("server error: ServiceNotReady: Topic is temporarily unavailable")
	f.Add("x server error: MetadataError: Consumer not found\ny")
	f.Add("server error: :")
	f.Fuzz(func(t *testing.T, text string) {
		name, message, ok := answer.Parse(errors.New(text))
		if !ok {
			assert.Empty(t, name)
			assert.Empty(t, message)
			return
		}
		assert.NotEmpty(t, name)
		assert.LessOrEqual(t, len(name), 64)
		assert.NotContains(t, name, " ")
		assert.NotContains(t, message, "\n")
		assert.Contains(t, text, name)
	})
}
