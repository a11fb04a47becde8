package idempotency_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// redisServer is a redis-server started for one test on a Unix socket of its own.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
}

// startRedis starts a redis-server for the test and returns it with a client; both are
// stopped in cleanup. Without the binary the test is skipped, except under CI=true, where
// it fails: CI never skips the Redis store tests.
func startRedis(tb testing.TB) (*redisServer, *redis.Client) {
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
	sock := filepath.Join(tb.TempDir(), "redis.sock")
	cmd := exec.Command(path, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	s := &redisServer{addr: sock, cmd: cmd}
	tb.Cleanup(s.stop)
	client := redis.NewClient(&redis.Options{Network: "unix", Addr: s.addr, MaxRetries: -1, DialTimeout: time.Second})
	tb.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if err := client.Ping(ctx).Err(); err == nil {
			return s, client
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

// stop kills the server and waits for it; it may be called more than once.
func (s *redisServer) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
