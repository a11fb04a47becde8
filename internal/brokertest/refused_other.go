//go:build !unix

package brokertest

import (
	"net"
	"testing"
)

// RefusedAddr returns a loopback address whose connections are refused. Off unix the port is
// only free at the moment of the call (a listener opened and closed), so a server of a test
// running in parallel can take it later; unix systems hold the port for the whole test.
func RefusedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := (&net.ListenConfig{}).Listen(tb.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("brokertest: listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		tb.Fatalf("brokertest: close the listener: %v", err)
	}
	return addr
}
