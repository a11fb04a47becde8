package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pulsar-client-go v0.19.0 leaves this per-producer goroutine until its SendTimeout
		// timer fires after Close: the client's, not ours.
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).failTimeoutMessages"),
	)
}

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
