package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

func TestPublishConsume(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out))
	s := out.String()
	assert.Contains(t, s, "broker: embedded Pulsar-protocol broker at pulsar://127.0.0.1:")
	assert.Equal(t, 5, strings.Count(s, "handled order "))
	assert.Contains(t, s, "handled order 1003 (750 cents), attempt 1\n")
	assert.True(t, strings.HasSuffix(s, "done: 5 published, 5 handled\n"), s)
}
