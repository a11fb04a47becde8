package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

var line = regexp.MustCompile(`(?m)^(scheduler|audit)\s+(\S+)\s+delay (\S+), received after ([0-9.]+)s`)

func TestDelayedDelivery(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out))
	matches := line.FindAllStringSubmatch(out.String(), -1)
	require.Len(t, matches, 6, out.String())
	for _, m := range matches {
		delay, err := time.ParseDuration(m[3])
		require.NoError(t, err)
		after, err := strconv.ParseFloat(m[4], 64)
		require.NoError(t, err)
		if m[1] == "scheduler" {
			// Shared: never before the delay (the printed figure is rounded to 0.1 s).
			assert.GreaterOrEqual(t, after+0.05, delay.Seconds(), m[0])
		} else if delay > 0 {
			// Exclusive: at once, well before the delay.
			assert.Less(t, after, delay.Seconds(), m[0])
		}
	}
}
