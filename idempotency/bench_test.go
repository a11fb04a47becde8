package idempotency_test

import (
	"context"
	"strconv"
	"testing"
	"time"

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

// BenchmarkRedisDecision puts the Redis store's cost per message beside one plain SET round
// trip on the same server, in the same run: "set" is SET key value (one round trip, the
// floor of any decision), "new" a new id through the guard (the claim script, the handler,
// the commit script: two round trips), "claim" and "commit" each of those decisions alone,
// "duplicate" a remembered id through the guard (the claim script: one round trip). The scripts run with EVALSHA; Preload loads them first, so no EVAL fallback is
// timed.
func BenchmarkRedisDecision(b *testing.B) {
	_, client := redistest.Start(b)
	ctx := context.Background()
	s, err := redisstore.New(client)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Preload(ctx); err != nil {
		b.Fatal(err)
	}
	g, err := idempotency.New(s)
	if err != nil {
		b.Fatal(err)
	}
	noop := func(context.Context) error { return nil }
	b.Run("set", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if err := client.Set(ctx, "bench:set:"+strconv.Itoa(i), "d", 0).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	round := 0 // the benchmark function runs again for each b.N: every round its own ids
	b.Run("new", func(b *testing.B) {
		round++
		ids := make([]string, b.N)
		for i := range ids {
			ids[i] = "bench:new:" + strconv.Itoa(round) + ":" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if res, err := g.Do(ctx, ids[i], noop); err != nil || res != idempotency.Ran {
				b.Fatal(res, err)
			}
		}
	})
	// The two decisions of a new id, each on its own: one script, one round trip.
	b.Run("claim", func(b *testing.B) {
		round++
		ids := make([]string, b.N)
		for i := range ids {
			ids[i] = "bench:claim:" + strconv.Itoa(round) + ":" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := s.Claim(ctx, ids[i], time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("commit", func(b *testing.B) {
		round++
		ids := make([]string, b.N)
		tokens := make([]string, b.N)
		for i := range ids {
			ids[i] = "bench:commit:" + strconv.Itoa(round) + ":" + strconv.Itoa(i)
			c, err := s.Claim(ctx, ids[i], time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			tokens[i] = c.Token
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := s.Commit(ctx, ids[i], tokens[i], time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("duplicate", func(b *testing.B) {
		if _, err := g.Do(ctx, "bench:dup", noop); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if res, err := g.Do(ctx, "bench:dup", noop); err != nil || res != idempotency.Skipped {
				b.Fatal(res, err)
			}
		}
	})
}
