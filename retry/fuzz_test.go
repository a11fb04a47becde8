package retry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// FuzzIsRetryable feeds IsRetryable error texts (the broker's answers reach it as text): it
// never panics, and a text is retryable only when it names one of the retryable ServerErrors
// after "server error: ", or is none of the typed errors it knows (then it is not).
func FuzzIsRetryable(f *testing.F) {
	for _, s := range []string{
		"server error: ServiceNotReady: Topic is temporarily unavailable",
		"server error: ConsumerBusy: Exclusive consumer is already connected",
		"server error: : ", "server error: ", "server error: TooManyRequests:",
		"subscribe: server error: PersistenceError: bookie down", "boom", "",
	} {
		f.Add(s)
	}
	retryable := []string{"ServiceNotReady", "TooManyRequests", "MetadataError", "PersistenceError"}
	f.Fuzz(func(t *testing.T, text string) {
		got := retry.IsRetryable(errors.New(text))
		if !got {
			return
		}
		_, rest, ok := strings.Cut(text, "server error: ")
		if !ok {
			t.Fatalf("%q: retryable without a server error", text)
		}
		name, _, _ := strings.Cut(rest, ":")
		for _, r := range retryable {
			if name == r {
				return
			}
		}
		t.Fatalf("%q: retryable with ServerError %q", text, name)
	})
}
