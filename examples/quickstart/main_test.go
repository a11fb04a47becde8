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

func TestQuickstart(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out))
	s := out.String()
	assert.Contains(t, s, "1. published 20 orders to persistent://public/default/orders\n")
	assert.Contains(t, s, "   first pass: 17 handled, 9 retried, 3 dead-lettered\n")
	assert.Contains(t, s, "3. persistent://public/default/orders.dlq holds 3 message(s):\n")
	assert.Equal(t, 3, strings.Count(s, "   failed after 3 attempts: order 10"), s)
	assert.Contains(t, s, "inventory service offline")
	assert.Contains(t, s, "4. redrove 3 message(s)")
	assert.True(t, strings.HasSuffix(s, "done: 20 published, 20 handled, 9 retried, 3 dead-lettered, 3 redriven\n"), s)
}
