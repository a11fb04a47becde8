package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// ErrAdmin is wrapped by the errors an [Admin] returns for an answer of the admin API it
// cannot use (an HTTP error status, a malformed body).
var ErrAdmin = errors.New("dlq: admin API")

// maxPeekBody bounds the body of one peeked entry (Pulsar's largest message is 5 MiB by
// default; a batch of them stays below this).
const maxPeekBody = 64 << 20

// Admin is a client of the few read-only endpoints of Pulsar's admin REST API (v2) that a
// strictly read-only look at a subscription needs: a topic's partition count, its
// subscriptions, and "peek messages" (the n-th message still pending on a subscription,
// which moves no cursor). It never writes. It is safe for concurrent use.
type Admin struct {
	base  string
	token string
	hc    *http.Client
}

// AdminOption configures [NewAdmin].
type AdminOption func(*Admin)

// WithAdminToken sends token as "Authorization: Bearer <token>" (Pulsar's token
// authentication). Default: no Authorization header.
func WithAdminToken(token string) AdminOption { return func(a *Admin) { a.token = token } }

// WithHTTPClient makes the Admin use hc (for TLS settings or a proxy). Default: a client
// with a 30 s timeout per request. The Admin works on a copy: an *http.Transport (or, for
// none, http.DefaultTransport) is cloned with keep-alives off and with connections that
// read control characters in an answer's headers as spaces, which the broker writes there
// from a message's key (see [Message.Key]). So that this reading sits above every protocol
// on the way, the copy makes TLS, a tunnel through an http(s) proxy (CONNECT) and a SOCKS5
// connection itself, with the transport's settings: TLSClientConfig, DialContext,
// DialTLSContext (used for TLS to the broker or to an https proxy), Proxy (asked once per
// request), ProxyConnectHeader, GetProxyConnectHeader, OnProxyConnectResponse and
// MaxResponseHeaderBytes; a proxy URL's user info is sent as Basic credentials, as net/http
// does. Another RoundTripper is used as it is.
func WithHTTPClient(hc *http.Client) AdminOption { return func(a *Admin) { a.hc = hc } }

// NewAdmin returns an Admin for the web service URL of a Pulsar cluster, e.g.
// "http://localhost:8080" or "https://pulsar.example.com:8443". It returns an error
// wrapping [ErrInvalidOptions] for a URL that is not absolute http(s) without query or
// fragment.
func NewAdmin(serviceURL string, opts ...AdminOption) (*Admin, error) {
	u, err := url.Parse(serviceURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: admin URL %q: %w", ErrInvalidOptions, serviceURL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: admin URL %q: the scheme must be http or https", ErrInvalidOptions, serviceURL)
	case u.Host == "":
		return nil, fmt.Errorf("%w: admin URL %q: no host", ErrInvalidOptions, serviceURL)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("%w: admin URL %q: no query, fragment or user info", ErrInvalidOptions, serviceURL)
	}
	a := &Admin{base: strings.TrimRight(u.String(), "/"), hc: &http.Client{Timeout: 30 * time.Second}}
	for _, o := range opts {
		if o != nil {
			o(a)
		}
	}
	if a.hc == nil {
		return nil, fmt.Errorf("%w: nil HTTP client", ErrInvalidOptions)
	}
	a.hc = headerSafeClient(a.hc)
	return a, nil
}

// restPath is the admin path of a topic: "persistent/tenant/namespace/name" (short names
// are in public/default), each segment escaped.
func restPath(topic string) (string, error) {
	t, err := parseTopic(topic)
	if err != nil {
		return "", err
	}
	domain, rest := "persistent", topic
	if i := strings.Index(topic, "://"); i >= 0 {
		domain, rest = topic[:i], topic[i+3:]
	}
	parts := strings.Split(rest, "/")
	if len(parts) == 1 {
		parts = []string{"public", "default", t.local}
	}
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return domain + "/" + strings.Join(parts, "/"), nil
}

// statusError is an HTTP error answer.
type statusError struct {
	status int
	reason string
}

func (e *statusError) Error() string {
	if e.reason == "" {
		return fmt.Sprintf("HTTP %d", e.status)
	}
	return fmt.Sprintf("HTTP %d: %s", e.status, e.reason)
}

func (*statusError) Is(target error) bool { return target == ErrAdmin }

func (a *Admin) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/admin/v2/"+path, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAdmin, err)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("dlq: admin GET %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var r struct {
			Reason string `json:"reason"`
		}
		reason := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &r) == nil && r.Reason != "" {
			reason = r.Reason
		}
		return nil, &statusError{status: resp.StatusCode, reason: reason}
	}
	return resp, nil
}

func (a *Admin) getJSON(ctx context.Context, path string, v any) error {
	resp, err := a.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(v); err != nil {
		return fmt.Errorf("%w: GET %s: %w", ErrAdmin, path, err)
	}
	return nil
}

func isNotFound(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.status == http.StatusNotFound
}

// Partitions returns the partition count of a partitioned topic, 0 for a non-partitioned
// (or missing) one. It reads the partitioned-topic metadata; it creates nothing. Pulsar 4.0
// answers that read with 404 for a topic that does not exist: that is 0 too.
func (a *Admin) Partitions(ctx context.Context, topic string) (int, error) {
	p, err := restPath(topic)
	if err != nil {
		return 0, err
	}
	var md struct {
		Partitions int `json:"partitions"`
	}
	if err := a.getJSON(ctx, p+"/partitions", &md); err != nil {
		if isNotFound(err) {
			return 0, nil
		}
		return 0, err
	}
	if md.Partitions < 0 {
		return 0, fmt.Errorf("%w: %s has %d partitions", ErrAdmin, topic, md.Partitions)
	}
	return md.Partitions, nil
}

// Subscriptions returns the subscription names of a topic (or of one partition); found is
// false when the topic does not exist.
func (a *Admin) Subscriptions(ctx context.Context, topic string) (subs []string, found bool, err error) {
	p, err := restPath(topic)
	if err != nil {
		return nil, false, err
	}
	if err := a.getJSON(ctx, p+"/subscriptions", &subs); err != nil {
		if isNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return subs, true, nil
}

// peekNth returns the messages of the n-th entry (1-based) still pending on subscription
// sub of topic (a non-partitioned topic or one partition): "peek messages", which moves no
// cursor. ok is false past the last pending entry.
func (a *Admin) peekNth(ctx context.Context, partition, sub string, n int) (msgs []Message, ok bool, err error) {
	p, err := restPath(partition)
	if err != nil {
		return nil, false, err
	}
	path := p + "/subscription/" + url.PathEscape(sub) + "/position/" + strconv.Itoa(n)
	resp, err := a.get(ctx, path)
	if isNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPeekBody+1))
	if err != nil {
		return nil, false, fmt.Errorf("dlq: admin GET %s: %w", path, err)
	}
	if len(body) > maxPeekBody {
		return nil, false, fmt.Errorf("%w: GET %s: entry larger than %d bytes", ErrAdmin, path, maxPeekBody)
	}
	msgs, err = parsePeeked(partition, resp.Header, body)
	if err != nil {
		return nil, false, fmt.Errorf("%w: GET %s: %w", ErrAdmin, path, err)
	}
	return msgs, true, nil
}

// parsePeeked decodes one "peek messages" answer: the entry's metadata in X-Pulsar-*
// headers and its uncompressed payload in the body, which for a batch is the batch's
// messages, each behind its length-prefixed single-message metadata.
func parsePeeked(topic string, h http.Header, body []byte) ([]Message, error) {
	ledger, entry, err := parseEntryID(h.Get("X-Pulsar-Message-ID"))
	if err != nil {
		return nil, err
	}
	partition := int32(-1)
	if i := strings.LastIndex(topic, "-partition-"); i >= 0 && stripPartition(topic[i:]) == "" {
		if n, err := strconv.ParseInt(topic[i+len("-partition-"):], 10, 32); err == nil {
			partition = int32(n)
		}
	}
	props, err := peekedProperties(h)
	if err != nil {
		return nil, err
	}
	var published time.Time
	for _, layout := range []string{"2006-01-02T15:04:05.000-0700", time.RFC3339Nano} {
		if t, err := time.Parse(layout, h.Get("X-Pulsar-publish-time")); err == nil {
			published = t
			break
		}
	}
	base := Message{Topic: topic, PublishTime: published, Key: latin1(h.Get("X-Pulsar-partition-key")), Properties: props}
	nb := h.Get("X-Pulsar-num-batch-message")
	if nb == "" {
		m := base
		m.ID = apulsar.NewMessageID(ledger, entry, -1, partition)
		m.Payload = body
		return []Message{classified(m)}, nil
	}
	n, err := strconv.Atoi(nb)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("X-Pulsar-num-batch-message %q", nb)
	}
	singles, err := splitBatch(body, n)
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, n)
	for i, s := range singles {
		m := base
		m.ID = apulsar.NewMessageID(ledger, entry, int32(i), partition)
		m.Properties = make(map[string]string, len(props)+len(s.props))
		for k, v := range props {
			m.Properties[k] = v
		}
		for k, v := range s.props {
			m.Properties[k] = v
		}
		if s.key != "" {
			m.Key = s.key
		}
		m.OrderingKey, m.Payload = s.orderingKey, s.payload
		out = append(out, classified(m))
	}
	return out, nil
}

// peekedProperties reads the message properties of a peeked entry: one JSON header
// (X-Pulsar-PROPERTY) on current brokers, one X-Pulsar-PROPERTY-<name> header per property
// on older ones, whose names reach us canonicalized, so they are lower-cased here.
func peekedProperties(h http.Header) (map[string]string, error) {
	props := map[string]string{}
	if js := h.Get("X-Pulsar-PROPERTY"); js != "" {
		if err := json.Unmarshal([]byte(latin1(js)), &props); err != nil {
			return nil, fmt.Errorf("X-Pulsar-PROPERTY: %w", err)
		}
		return props, nil
	}
	const prefix = "X-Pulsar-Property-" // canonical form of X-Pulsar-PROPERTY-
	for k, vs := range h {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok || name == "" || len(vs) == 0 || name == "Total-Chunks" || name == "Chunk-Id" {
			continue
		}
		props[strings.ToLower(name)] = latin1(vs[0])
	}
	return props, nil
}

func parseEntryID(s string) (ledger, entry int64, err error) {
	l, e, ok := strings.Cut(s, ":")
	if ok {
		e, _, _ = strings.Cut(e, ":") // some versions append the partition
		ledger, err = strconv.ParseInt(l, 10, 64)
		if err == nil {
			entry, err = strconv.ParseInt(e, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("X-Pulsar-Message-ID %q is not ledger:entry", s)
	}
	return ledger, entry, nil
}

// Backlog returns the number of entries pending on subscription sub of topic (summed over
// the partitions of a partitioned topic): the msgBacklog of the topic stats, read through the
// admin API, which changes nothing. Pulsar counts a batch of messages as one entry, so this
// is the number of messages only when no batch holds more than one (this SDK writes dead
// letters in batches of one). It returns a *[SubscriptionError] wrapping [ErrSubscriptionNotFound] when the
// topic or the subscription does not exist.
func (a *Admin) Backlog(ctx context.Context, topic, sub string) (int64, error) {
	targets, err := a.partitions(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("dlq: backlog of %q: %w", topic, err)
	}
	var total int64
	for _, t := range targets {
		p, err := restPath(t)
		if err != nil {
			return 0, err
		}
		body, err := a.getBody(ctx, p+"/stats")
		if isNotFound(err) {
			return 0, notRetained(t, sub, false)
		}
		if err != nil {
			return 0, fmt.Errorf("dlq: backlog of %q: %w", t, err)
		}
		n, found, err := parseBacklog(body, sub)
		if err != nil {
			return 0, fmt.Errorf("%w: GET %s/stats: %w", ErrAdmin, p, err)
		}
		if !found {
			return 0, notRetained(t, sub, true)
		}
		total += n
	}
	return total, nil
}

// getBody returns the body of a successful GET, at most 16 MiB of it.
func (a *Admin) getBody(ctx context.Context, path string) ([]byte, error) {
	resp, err := a.get(ctx, path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("dlq: admin GET %s: %w", path, err)
	}
	return body, nil
}

// parseBacklog reads the msgBacklog of subscription sub from a topic stats answer; found is
// false when the topic has no such subscription.
func parseBacklog(body []byte, sub string) (n int64, found bool, err error) {
	var st struct {
		Subscriptions map[string]struct {
			MsgBacklog *int64 `json:"msgBacklog"`
		} `json:"subscriptions"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return 0, false, fmt.Errorf("topic stats: %w", err)
	}
	s, ok := st.Subscriptions[sub]
	switch {
	case !ok:
		return 0, false, nil
	case s.MsgBacklog == nil:
		return 0, true, fmt.Errorf("topic stats: subscription %q has no msgBacklog", sub)
	case *s.MsgBacklog < 0:
		return 0, true, fmt.Errorf("topic stats: subscription %q has a negative msgBacklog %d", sub, *s.MsgBacklog)
	}
	return *s.MsgBacklog, true, nil
}
