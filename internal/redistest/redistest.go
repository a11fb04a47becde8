// Package redistest is the module's test support for code that talks to Redis: it starts a
// redis-server of its own for one test, on a Unix socket in the test's temporary directory,
// and hands back a client; both are stopped when the test ends. [StoreKinds] gives
// the stores that the idempotency, idempotency/redisstore and pulsar/connector tests run
// on. It is imported by _test.go files only.
//
// Without the redis-server binary on PATH the test is skipped with the reason, except under
// CI=true, where it fails: CI never skips the Redis store tests.
package redistest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency/redisstore"
)

// Server is a redis-server started for one test.
type Server struct {
	path string // the redis-server binary
	addr string
	cmd  *exec.Cmd
}

// Start starts a redis-server for the test and returns it with a client on it; both are
// stopped in cleanup.
func Start(tb testing.TB) (*Server, *redis.Client) {
	tb.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("redis-server not found on PATH and CI=true: the Redis store tests never skip in CI (install redis-server)")
		}
		tb.Skip("redis-server not found on PATH: Redis store tests skipped (install redis-server to run them; under CI=true they fail instead)")
	}
	// A Unix socket in the test's own directory: no port to pick, so none that another test
	// or process can take between the pick and the server's bind (a port taken by listening
	// on :0 and closing it again is free only until someone else listens).
	s := &Server{path: path, addr: filepath.Join(tb.TempDir(), "redis.sock")}
	s.launch(tb)
	tb.Cleanup(s.Stop)
	client := redis.NewClient(&redis.Options{Network: "unix", Addr: s.addr, MaxRetries: -1, DialTimeout: time.Second})
	tb.Cleanup(func() { _ = client.Close() })
	s.await(tb, client)
	return s, client
}

// launch starts the server process on s.addr.
func (s *Server) launch(tb testing.TB) {
	tb.Helper()
	// The server outlives the test's context (cleanups close the client, then stop it), so
	// it runs on a context that does not end; Stop ends it.
	cmd := exec.CommandContext(context.Background(), s.path, "--port", "0", "--unixsocket", s.addr, //nolint:gosec // G204: the redis-server found on PATH, with our own arguments
		"--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--loglevel", "warning")
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
}

// await waits until client gets an answer from the server.
func (s *Server) await(tb testing.TB, client *redis.Client) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if err := client.Ping(ctx).Err(); err == nil {
			return
		} else if ctx.Err() != nil {
			tb.Fatalf("redis-server on %s did not answer: %v", s.addr, err)
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// Restart stops the server, which loses every key (it keeps nothing on disk), and starts a
// new one on the same address; it returns once client gets an answer from it. It is what a
// Redis restarted without persistence looks like to its clients.
func (s *Server) Restart(tb testing.TB, client *redis.Client) {
	tb.Helper()
	s.Stop()
	s.launch(tb)
	s.await(tb, client)
}

// Stop kills the server and waits for it; it may be called more than once.
func (s *Server) Stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// StoreKind is one [idempotency.Store] implementation that the store-generic tests run on.
type StoreKind struct {
	// Name names the subtest ("memory", "redis").
	Name string
	// New returns a fresh store for t: the Redis one on a redis-server of t's own (see
	// [Start]), its keys under a prefix named after the test.
	New func(t *testing.T) idempotency.Store
}

// StoreKinds are the stores every contract, guard and connector-guard test runs on: the
// in-memory store and the Redis store.
func StoreKinds() []StoreKind {
	return []StoreKind{
		{"memory", func(t *testing.T) idempotency.Store {
			t.Helper()
			s, err := idempotency.NewMemoryStore()
			if err != nil {
				t.Fatalf("redistest: the memory store: %v", err)
			}
			return s
		}},
		{"redis", func(t *testing.T) idempotency.Store {
			t.Helper()
			_, client := Start(t)
			s, err := redisstore.New(client, redisstore.WithKeyPrefix("test:"+t.Name()+":"))
			if err != nil {
				t.Fatalf("redistest: the Redis store: %v", err)
			}
			return s
		}},
	}
}
