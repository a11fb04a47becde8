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

func TestRedrive(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out))
	s := out.String()
	assert.Contains(t, s, "orders.dlq holds 3 message(s):\n")
	assert.Equal(t, 2, strings.Count(s, "  urn:babel:orders:created reason=failed attempts=1\n"), s)
	assert.Contains(t, s, "  urn:babel:orders:archived reason=unknown_urn attempts=1\n")
	assert.Contains(t, s, "dry run: would move 2, skip 1\n")
	assert.Contains(t, s, "redrive: moved 2, skipped 1")
	assert.Contains(t, s, `handled urn:babel:orders:created, data {"order_id":3001}, attempts 0`+"\n")
	assert.True(t, strings.HasSuffix(s, "done: 2 redriven order(s) handled\n"), s)
}
