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

func TestKeySharedOrdering(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out))
	s := out.String()
	assert.Equal(t, accounts, strings.Count(s, ": handled [1 2 3 4 5] by 1 consumer(s), in order: true\n"), s)
	assert.True(t, strings.HasSuffix(s, "done: 4 of 4 accounts handled in publish order\n"), s)
}
