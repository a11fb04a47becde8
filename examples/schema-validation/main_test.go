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

func TestSchemaValidation(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out))
	s := out.String()
	assert.Contains(t, s, "registry: schemas for [urn:babel:orders:created]\n")
	assert.Contains(t, s, "publish refused: 3 violations\n")
	assert.Contains(t, s, "  /currency: ")
	assert.Contains(t, s, "  /order_id: ")
	assert.Contains(t, s, "  /total_cents: ")
	assert.Contains(t, s, "dead letter on persistent://public/default/orders.dlq: reason=failed attempts=1 data={\"order_id\":2,\"total_cents\":\"12.50\"}\n")
	assert.Contains(t, s, `/total_cents: `)
	assert.True(t, strings.HasSuffix(s, "done: handled orders [1]\n"), s)
}
