// Package answer reads a broker's error answer out of the text that pulsar-client-go gives
// it. v0.21.0, as v0.19.0 before it, passes the CommandError of a Subscribe,
// CreateProducer, lookup or GET_LAST_MESSAGE_ID on as plain text (internal/connection.go:
// "server error: %s: %s", the ServerError name and the broker's message), not as a
// *pulsar.Error; v0.21.0's own reconnect logic finds the non-retriable names in that same
// text (apache/pulsar-client-go#1490). This package is the one place that text is taken
// apart.
package answer

import "strings"

// prefix opens the text of a broker's error answer.
const prefix = "server error: "

// Parse returns the ServerError name and the broker's message of the answer in err's text
// ("server error: ServiceNotReady: Topic is temporarily unavailable" gives
// "ServiceNotReady" and "Topic is temporarily unavailable"), and false when err's text
// carries none. The name is the protocol's ServerError enum name: letters only, at most 64;
// nothing is returned for anything else. The message runs to the end of its line (an
// errors.Join puts each error on a line of its own).
func Parse(err error) (name, message string, ok bool) {
	if err == nil {
		return "", "", false
	}
	text := err.Error()
	i := strings.Index(text, prefix)
	if i < 0 {
		return "", "", false
	}
	name, rest, found := strings.Cut(text[i+len(prefix):], ":")
	if !found || name == "" || len(name) > 64 {
		return "", "", false
	}
	for _, r := range name {
		if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') {
			return "", "", false
		}
	}
	message, _, _ = strings.Cut(rest, "\n")
	return name, strings.TrimSpace(message), true
}
