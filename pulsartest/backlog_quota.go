package pulsartest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Backlog quotas (namespace policy destination_storage), as Pulsar enforces them: every check interval the
// broker compares each topic's backlog size (bytes from its slowest subscription's mark-delete position on)
// with its namespace's limit. Over the limit, producer_request_hold and producer_exception disconnect the
// topic's producers and refuse new ones (ProducerBlockedQuotaExceededError, respectively
// ProducerBlockedQuotaExceededException, on which the client fails its pending messages and keeps
// reconnecting); consumer_backlog_eviction moves the slowest subscriptions on until the backlog fits.

// BacklogQuotaPolicy is what happens when a topic's backlog exceeds its quota.
type BacklogQuotaPolicy string

// Backlog quota policies, with Pulsar's names.
const (
	ProducerRequestHold    BacklogQuotaPolicy = "producer_request_hold"
	ProducerException      BacklogQuotaPolicy = "producer_exception"
	ConsumerBacklogEvicton BacklogQuotaPolicy = "consumer_backlog_eviction"
)

// ErrInvalidQuota is returned for a backlog quota with an unknown policy or a negative limit.
var ErrInvalidQuota = errors.New("pulsartest: invalid backlog quota")

// defaultQuotaCheck is Pulsar's backlogQuotaCheckIntervalInSeconds default.
const defaultQuotaCheck = 60 * time.Second

// WithBacklogQuotaCheck sets how often backlog quotas are checked (Pulsar's
// backlogQuotaCheckIntervalInSeconds). Default: 60 s.
func WithBacklogQuotaCheck(every time.Duration) Option {
	return func(o *options) {
		if every > 0 {
			o.quotaCheck = every
		}
	}
}

type backlogQuota struct {
	limit  int64
	policy BacklogQuotaPolicy
}

type quotaState struct {
	mu     sync.Mutex
	byNS   map[string]backlogQuota
	stop   func() bool
	closed bool
}

// SetBacklogQuota sets the destination-storage backlog quota of a namespace ("tenant/namespace"): limit in
// bytes and the policy applied over it.
func (b *Broker) SetBacklogQuota(namespace string, limit int64, policy BacklogQuotaPolicy) error {
	switch policy {
	case ProducerRequestHold, ProducerException, ConsumerBacklogEvicton:
	default:
		return fmt.Errorf("%w: policy %q", ErrInvalidQuota, policy)
	}
	if limit < 0 {
		return fmt.Errorf("%w: limit %d", ErrInvalidQuota, limit)
	}
	q := &b.quotas
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.byNS == nil {
		q.byNS = map[string]backlogQuota{}
	}
	q.byNS[namespace] = backlogQuota{limit: limit, policy: policy}
	if q.stop == nil && !q.closed {
		b.scheduleQuotaCheckLocked()
	}
	return nil
}

// RemoveBacklogQuota removes the namespace's backlog quota.
func (b *Broker) RemoveBacklogQuota(namespace string) {
	b.quotas.mu.Lock()
	delete(b.quotas.byNS, namespace)
	b.quotas.mu.Unlock()
}

func (b *Broker) quotaOf(namespace string) (backlogQuota, bool) {
	b.quotas.mu.Lock()
	defer b.quotas.mu.Unlock()
	q, ok := b.quotas.byNS[namespace]
	return q, ok
}

func (b *Broker) scheduleQuotaCheckLocked() {
	every := b.opts.quotaCheck
	if every <= 0 {
		every = defaultQuotaCheck
	}
	b.quotas.stop = b.opts.clock.AfterFunc(every, func() {
		if !b.enter() {
			return
		}
		defer b.wg.Done()
		b.checkQuotas()
		b.quotas.mu.Lock()
		if !b.quotas.closed {
			b.scheduleQuotaCheckLocked()
		}
		b.quotas.mu.Unlock()
	})
}

// stopQuotaCheck ends the periodic check (Close).
func (b *Broker) stopQuotaCheck() {
	b.quotas.mu.Lock()
	defer b.quotas.mu.Unlock()
	b.quotas.closed = true
	if b.quotas.stop != nil {
		b.quotas.stop()
	}
}

func (b *Broker) checkQuotas() {
	b.mu.Lock()
	topics := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		topics = append(topics, t)
	}
	b.mu.Unlock()
	for _, t := range topics {
		q, ok := b.quotaOf(namespaceOf(t.name))
		if !ok {
			continue
		}
		t.mu.Lock()
		var outs []outbound
		if t.backlogBytesLocked() > q.limit {
			if q.policy == ConsumerBacklogEvicton {
				t.evictLocked(q.limit)
			} else {
				for p := range t.producers {
					outs = append(outs, p.c.closeProducer(p))
					outs = t.removeProducerLocked(p, outs)
				}
			}
		}
		t.mu.Unlock()
		send(outs)
	}
}

// backlogBytesLocked is the size of the entries from the slowest subscription's mark-delete position on.
func (t *topic) backlogBytesLocked() int64 {
	from := int64(math.MaxInt64)
	for _, s := range t.subs {
		from = min(from, s.markDelete+1)
	}
	var n int64
	for id := max(from, t.first); id < t.next; id++ {
		n += int64(len(t.entry(id).raw))
	}
	return n
}

// evictLocked moves the slowest subscriptions on until the backlog fits the limit.
func (t *topic) evictLocked(limit int64) {
	for t.backlogBytesLocked() > limit {
		slowest := int64(math.MaxInt64)
		for _, s := range t.subs {
			slowest = min(slowest, s.markDelete)
		}
		if slowest+1 >= t.next {
			return
		}
		for _, s := range t.subs {
			if s.markDelete == slowest {
				s.ackUpTo(slowest + 1)
			}
		}
	}
}

// quotaRefusal is the PRODUCER refusal while the topic's backlog exceeds its quota (under t.mu).
func (t *topic) quotaRefusalLocked() (ServerError, string, bool) {
	q, ok := t.b.quotaOf(namespaceOf(t.name))
	if !ok || q.policy == ConsumerBacklogEvicton || t.backlogBytesLocked() <= q.limit {
		return 0, "", false
	}
	code := ProducerQuotaExceededError
	if q.policy == ProducerException {
		code = ProducerQuotaExceeded
	}
	return code, brokerException("TopicBacklogQuotaExceededException", "Cannot create producer on topic with backlog quota exceeded"), true
}

// Admin endpoints: POST/DELETE …/namespaces/{tenant}/{namespace}/backlogQuota, GET …/backlogQuotaMap.

func (a *adminServer) setBacklogQuota(w http.ResponseWriter, r *http.Request) {
	if bt := r.URL.Query().Get("backlogQuotaType"); bt != "" && bt != "destination_storage" {
		writeReason(w, http.StatusNotImplemented, "pulsartest: only destination_storage backlog quotas are supported")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64*1024))
	if err != nil {
		writeReason(w, http.StatusBadRequest, err.Error())
		return
	}
	var in struct {
		Limit     json.Number        `json:"limit"` // older admin clients, sometimes as a string
		LimitSize *int64             `json:"limitSize"`
		Policy    BacklogQuotaPolicy `json:"policy"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeReason(w, http.StatusBadRequest, "pulsartest: backlog quota: "+err.Error())
		return
	}
	limit := int64(-1)
	if in.LimitSize != nil {
		limit = *in.LimitSize
	} else if in.Limit != "" {
		limit, err = strconv.ParseInt(in.Limit.String(), 10, 64)
		if err != nil {
			writeReason(w, http.StatusBadRequest, "pulsartest: backlog quota limit "+strconv.Quote(in.Limit.String()))
			return
		}
	}
	if err := a.b.SetBacklogQuota(nsOf(r), limit, in.Policy); err != nil {
		writeReason(w, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *adminServer) removeBacklogQuota(w http.ResponseWriter, r *http.Request) {
	a.b.RemoveBacklogQuota(nsOf(r))
	w.WriteHeader(http.StatusNoContent)
}

func (a *adminServer) backlogQuotaMap(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{}
	if q, ok := a.b.quotaOf(nsOf(r)); ok {
		out["destination_storage"] = map[string]any{"limit": q.limit, "limitSize": q.limit, "limitTime": -1, "policy": q.policy}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *adminServer) registerQuota(mux *http.ServeMux) {
	const ns = "/admin/v2/namespaces/{tenant}/{namespace}"
	mux.HandleFunc("POST "+ns+"/backlogQuota", a.setBacklogQuota)
	mux.HandleFunc("DELETE "+ns+"/backlogQuota", a.removeBacklogQuota)
	mux.HandleFunc("GET "+ns+"/backlogQuotaMap", a.backlogQuotaMap)
}
