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

func TestRetryAndDeadLetter(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out))
	s := out.String()
	assert.Contains(t, s, "order 2: attempt 1 fails (payment gateway timeout)\n")
	assert.Contains(t, s, "order 2: attempt 2 succeeds\n")
	assert.Contains(t, s, "order 3: attempt 3 fails (negative total)\n")
	assert.NotContains(t, s, "order 3: attempt 4")
	assert.Contains(t, s, "dead letter on persistent://public/default/orders.dlq: reason=failed attempts=3 original_queue=orders error=\"order 3: negative total -100\"\n")
	assert.True(t, strings.HasSuffix(s, "done: 2 handled, 3 retried, 1 dead-lettered\n"), s)
}
