package idempotency_test

import (
	"context"
	"strconv"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency/redisstore"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/redistest"
)

// BenchmarkMiddleware measures the guard's cost per message around a handler that does
// nothing: "first" is a new id (claim, run, commit), "duplicate" a remembered one (one
// claim, skipped).
func BenchmarkMiddleware(b *testing.B) {
	kinds := []struct {
		name string
		new  func(b *testing.B) idempotency.Store
	}{
		{"memory", func(b *testing.B) idempotency.Store {
			b.Helper()
			s, err := idempotency.NewMemoryStore(idempotency.WithMaxEntries(b.N + 16))
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"redis", func(b *testing.B) idempotency.Store {
			b.Helper()
			_, client := redistest.Start(b)
			s, err := redisstore.New(client)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	env, err := envelope.Make("urn:babel:orders:created", map[string]int{"order_id": 1})
	if err != nil {
		b.Fatal(err)
	}
	noop := func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }
	ctx := context.Background()
	for _, k := range kinds {
		b.Run(k.name+"/first", func(b *testing.B) {
			g, err := idempotency.New(k.new(b))
			if err != nil {
				b.Fatal(err)
			}
			h := g.Middleware()(noop)
			envs := make([]*envelope.Envelope, b.N)
			for i := range envs {
				e := *env
				e.Meta.ID = "id-" + strconv.Itoa(i)
				envs[i] = &e
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := h(ctx, envs[i], nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(k.name+"/duplicate", func(b *testing.B) {
			g, err := idempotency.New(k.new(b))
			if err != nil {
				b.Fatal(err)
			}
			h := g.Middleware()(noop)
			if err := h(ctx, env, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := h(ctx, env, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
