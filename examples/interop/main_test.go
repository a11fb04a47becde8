package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

func TestInterop(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, ""))
	s := out.String()
	assert.Contains(t, s, `handled urn:babel:orders:created from lang=java (bq-* properties: true) attempts=0 data={"order_id":9007199254740993,"rate":1.0}`)
	assert.Contains(t, s, `from lang=python (bq-* properties: true) attempts=0 data={"order_id":2002,"amount":19.99,"note":"caf\u00e9"}`)
	assert.Contains(t, s, "from lang=go (bq-* properties: false) attempts=1")
	assert.NotContains(t, s, "error:")
	assert.True(t, strings.HasSuffix(s, "done: 4 foreign messages handled\n"), s)
}

func TestInteropWithConformanceFixtures(t *testing.T) {
	const dir = "../../../shared/babelqueue-conformance/fixtures"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("conformance fixtures not found at %s: %v", dir, err)
	}
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, dir))
	s := out.String()
	assert.Contains(t, s, "sent as fixture order-created.json\n")
	assert.Contains(t, s, "sent as fixture urn-alias.json\n")
	assert.Contains(t, s, "handled urn:babel:catalog:item.indexed from lang=python (bq-* properties: false) attempts=2")
	assert.True(t, strings.HasSuffix(s, "done: 8 foreign messages handled\n"), s)
}
