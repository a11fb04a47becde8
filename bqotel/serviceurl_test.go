package bqotel

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseServiceURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url  string
		host string
		port int
	}{
		{"pulsar://127.0.0.1:16650", "127.0.0.1", 16650},
		{"pulsar://broker", "broker", 6650},
		{"pulsar+ssl://broker.example", "broker.example", 6651},
		{"PULSAR+SSL://broker.example:7651/", "broker.example", 7651},
		{"pulsar://a:6650,b:6650,c:6650", "a", 6650},
		{"pulsar://a,b", "a", 6650},
		{"http://admin.example:8080/lookup", "admin.example", 8080},
		{"https://admin.example", "admin.example", 443},
		{"pulsar://[::1]:6650", "::1", 6650},
		{"pulsar://[::1]", "::1", 6650},
	} {
		host, port, err := parseServiceURL(c.url)
		require.NoError(t, err, c.url)
		assert.Equal(t, c.host, host, c.url)
		assert.Equal(t, c.port, port, c.url)
	}
}

// FuzzParseServiceURL: any string is refused or gives a host and a port in 1…65535.
func FuzzParseServiceURL(f *testing.F) {
	for _, s := range []string{"pulsar://127.0.0.1:6650", "pulsar+ssl://a,b/", "http://[::1]:80", "pulsar://", "x://y", "pulsar://a:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		host, port, err := parseServiceURL(s)
		if err != nil {
			return
		}
		if host == "" || port < 1 || port > 65535 {
			t.Fatalf("%q: host %q port %d", s, host, port)
		}
	})
}
