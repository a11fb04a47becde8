package dlq

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readerConn is a net.Conn that reads from r.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestHeadSafeConnCleansTheHeadOnly: in the head, a control character but HTAB, CR and LF
// reads as a space; from the empty line on, every byte is the body's, as it is, however the
// reads split the answer.
func TestHeadSafeConnCleansTheHeadOnly(t *testing.T) {
	t.Parallel()
	answer := "HTTP/1.1 200 OK\r\nX-Pulsar-partition-key: a\x01\x1b[2J\x7f\tb\r\nContent-Length: 4\r\n\r\n\x01\r\n\x1b"
	want := "HTTP/1.1 200 OK\r\nX-Pulsar-partition-key: a  [2J \tb\r\nContent-Length: 4\r\n\r\n\x01\r\n\x1b"
	for name, r := range map[string]func() io.Reader{
		"one read":         func() io.Reader { return strings.NewReader(answer) },
		"a byte at a time": func() io.Reader { return iotest.OneByteReader(strings.NewReader(answer)) },
		"halves":           func() io.Reader { return iotest.HalfReader(strings.NewReader(answer)) },
	} {
		got, err := io.ReadAll(&headSafeConn{Conn: readerConn{r: r()}})
		require.NoError(t, err, name)
		assert.Equal(t, want, string(got), name)
	}
}

// TestATunnelThatTheProxyDoesNotAnswerTimesOut: when the time for the proxy's answer runs
// out, the tunnel fails with the deadline, as net/http's own CONNECT does, not with the
// write or read that the closing of the connection under it broke.
func TestATunnelThatTheProxyDoesNotAnswerTimesOut(t *testing.T) {
	t.Parallel()
	conn, proxySide := net.Pipe() // a proxy that reads nothing and answers nothing
	t.Cleanup(func() { _ = proxySide.Close() })
	d := &safeDialer{dial: func(context.Context, string, string) (net.Conn, error) { return conn, nil }, maxHead: 1 << 20}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := d.tunnel(ctx, "tcp", "broker.example:8443", &url.URL{Scheme: "http", Host: "proxy.example:3128"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "dlq: admin proxy http://proxy.example:3128: CONNECT broker.example:8443")
}

func TestLatin1(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "plain", latin1("plain"))
	assert.Equal(t, "café ÿ", latin1("caf\xe9 \xff"), "each byte is the character of that code")
	assert.Equal(t, "a\u0080", latin1("a\x80"), "from the first byte past ASCII")
	assert.Equal(t, "éÿ", latin1("\xe9\xff"), "no ASCII at all")
}

// FuzzHeadSafeConn: whatever a server answers, the connection reads as many bytes as it was
// sent; before the first empty line no control character but HTAB, CR and LF is left; from
// the empty line on, the bytes are the server's.
func FuzzHeadSafeConn(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nX-Pulsar-partition-key: a\x01b\r\n\r\n\x01body"))
	f.Add([]byte("\n\n\x00"))
	f.Add([]byte("HTTP/1.1 200 OK\r\n\r\r\n\x1b"))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := io.ReadAll(&headSafeConn{Conn: readerConn{r: iotest.HalfReader(strings.NewReader(string(in)))}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(in) {
			t.Fatalf("read %d bytes of %d", len(got), len(in))
		}
		end := len(in)
		lf := 0
		for i, b := range in {
			if b == '\n' {
				if lf++; lf == 2 {
					end = i + 1
					break
				}
			} else if b != '\r' {
				lf = 0
			}
		}
		for i, b := range got[:end] {
			if b < ' ' && b != '\t' && b != '\r' && b != '\n' || b == 0x7f {
				t.Fatalf("control character %#x left in the head at %d", b, i)
			}
		}
		if string(got[end:]) != string(in[end:]) {
			t.Fatalf("the body changed")
		}
	})
}
