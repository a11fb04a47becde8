package messaging_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
)

const waitTimeout = 10 * time.Second

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newRuntime returns a runtime over props with the in-memory connector; it is
// shut down at the end of the test.
func newRuntime(t *testing.T, props map[string]string) (*messaging.Runtime, *inmemory.Connector) {
	t.Helper()
	conn := inmemory.New()
	cfg, err := messaging.LoadConfig(messaging.FromMap(props))
	require.NoError(t, err)
	rt := messaging.New(cfg, messaging.WithConnector(conn))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	return rt, conn
}

func start(t *testing.T, rt *messaging.Runtime) {
	t.Helper()
	require.NoError(t, rt.Start(testCtx(t)))
}

// counter records settlements of test messages.
type counter struct {
	mu      sync.Mutex
	acks    []string
	nacks   []string
	reasons []error
	changed chan struct{}
}

func newCounter() *counter { return &counter{changed: make(chan struct{})} }

func (c *counter) msg(v string) messaging.Message[string] {
	return messaging.NewMessage(v,
		messaging.WithAckFunc(func(context.Context) error { c.record(v, nil); return nil }),
		messaging.WithNackFunc(func(_ context.Context, r error, _ messaging.NackOptions) error { c.record(v, r); return nil }))
}

func (c *counter) record(v string, reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reason == nil {
		c.acks = append(c.acks, v)
	} else {
		c.nacks = append(c.nacks, v)
		c.reasons = append(c.reasons, reason)
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *counter) counts() (acks, nacks int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.acks), len(c.nacks)
}

func (c *counter) wait(t *testing.T, n int) {
	t.Helper()
	ctx := testCtx(t)
	for {
		c.mu.Lock()
		got, ch := len(c.acks)+len(c.nacks), c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("only %d of %d settlements", got, n)
		}
	}
}

func payloads(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

var errBoom = errors.New("boom")

type atomicBool = atomic.Bool
