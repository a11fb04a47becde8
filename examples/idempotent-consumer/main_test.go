package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

func TestIdempotentConsumer(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	t.Setenv("REDIS_ADDR", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out))
	s := out.String()
	assert.Contains(t, s, "store: in memory")
	assert.Contains(t, s, "published 5 orders, each 3 times (the same meta.id)\n")
	for i := 1; i <= 5; i++ {
		assert.Contains(t, s, fmt.Sprintf("order %d: charged 1 time(s)\n", i))
	}
	assert.True(t, strings.HasSuffix(s, "done: 15 deliveries acknowledged, 5 charges, 10 duplicates skipped\n"), s)
}
