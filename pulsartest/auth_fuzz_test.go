package pulsartest

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzVerifyJWT feeds arbitrary tokens to the JWT check: it must never panic, and only a token signed
// with the key may name a subject.
func FuzzVerifyJWT(f *testing.F) {
	f.Add("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.sig")
	f.Add("a.b.c")
	f.Add("..")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		sub, err := verifyJWT(tok, []byte("key"), time.Unix(0, 0))
		if err == nil && sub == "" {
			t.Fatalf("accepted %q without a subject", tok)
		}
	})
}

// FuzzPartitionsBody feeds arbitrary bodies to the partition-count parser of the admin subset.
func FuzzPartitionsBody(f *testing.F) {
	f.Add("3")
	f.Add(`{"partitions":4,"properties":null}`)
	f.Add(`{"partitions":"x"}`)
	f.Fuzz(func(t *testing.T, body string) {
		r, err := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://x/", strings.NewReader(body))
		if err != nil {
			t.Skip()
		}
		_, _ = partitionsBody(r)
	})
}
