//go:build unix

package brokertest

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// RefusedAddr returns a loopback address whose every connection is refused for as long as the
// test runs. The port is held by a TCP socket that is bound and never listens: the kernel
// answers each connection with a reset, and no other listener (a pulsartest admin server, an
// httptest server of a test running in parallel) can take the port meanwhile. A port that was
// merely free a moment ago can be taken: a Pulsar client that then dials an HTTP server reads
// "HTTP" as a frame size and allocates gigabytes during its handshake.
func RefusedAddr(tb testing.TB) string {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatalf("brokertest: socket: %v", err)
	}
	tb.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatalf("brokertest: bind a loopback port: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatalf("brokertest: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		tb.Fatalf("brokertest: getsockname gave %T, not an IPv4 address", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
}
