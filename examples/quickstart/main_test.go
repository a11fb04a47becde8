package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out))
	s := out.String()
	assert.Contains(t, s, "1. encoded envelope")
	assert.Contains(t, s, "2. properties: 6\n")
	assert.Contains(t, s, "   bq-job            urn:babel:orders:created\n")
	assert.Contains(t, s, "3. accepted urn:babel:orders:created: order 1042, 1999 EUR cents\n")
	assert.Contains(t, s, `"data":{"amount":9007199254740993,"rate":1.0}`, "exact numbers survive the retry copy")
	assert.Contains(t, s, `"attempts":1`)
	assert.Contains(t, s, `"tenant":"t-9"`, "unknown meta keys survive")
	assert.Contains(t, s, "5. poison (rule ")
	assert.Contains(t, s, `"reason":"poison"`)
	assert.Equal(t, 7, strings.Count(s, "\n   "), "six property lines and one dead-letter line")
}
