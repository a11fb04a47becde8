package brokertest

import (
	"context"
	"errors"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestRefusedAddrRefusesAndHoldsThePort: a dial is refused at once, and on unix no listener
// can take the port while the test runs.
func TestRefusedAddrRefusesAndHoldsThePort(t *testing.T) {
	addr := RefusedAddr(t)
	d := net.Dialer{Timeout: 5 * time.Second}
	for range 3 {
		c, err := d.DialContext(t.Context(), "tcp", addr)
		if err == nil {
			_ = c.Close()
			t.Fatalf("dial %s: connected, want connection refused", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want connection refused", addr, err)
		}
	}
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err == nil {
		_ = ln.Close()
		t.Fatalf("listen %s: a listener took the port RefusedAddr holds", addr)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("listen %s: %v, want address in use", addr, err)
	}
}
