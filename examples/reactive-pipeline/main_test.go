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

func TestReactivePipeline(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out))
	s := out.String()
	assert.Contains(t, s, "runtime started: ready=true live=true\n")
	assert.Contains(t, s, "published 5 orders\n")
	for _, want := range []string{
		"invoice: order o-1, 1250 cents\n", "invoice: order o-2, 990 cents\n",
		"invoice: order o-4, 4200 cents\n", "invoice: order o-5, 15 cents\n",
	} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "invoice: order o-3")
	assert.Contains(t, s, `dead letter: {"id":"o-3","total_cents":-100} attempts=3`+"\n")
	assert.True(t, strings.HasSuffix(s, "done: 4 invoices, 1 dead letter\n"), s)
}
