package messaging

import (
	"context"
	"sync"
)

// tracker counts the messages in flight in the graph: from the moment a
// source or an emitter hands one in until its settlement function returned.
// Shutdown waits on it and, at the deadline, nacks
// the rest.
type tracker struct {
	mu    sync.Mutex
	items map[inflight]struct{}
	zero  chan struct{} // created by a waiter, closed when no message is in flight
}

// inflight is a tracked message: abort nacks it at the shutdown deadline.
type inflight interface {
	abort(ctx context.Context, reason error)
}

func newTracker() *tracker {
	return &tracker{items: map[inflight]struct{}{}}
}

func (t *tracker) add(it inflight) {
	t.mu.Lock()
	t.items[it] = struct{}{}
	t.mu.Unlock()
}

func (t *tracker) done(it inflight) {
	t.mu.Lock()
	if _, ok := t.items[it]; ok {
		delete(t.items, it)
		if len(t.items) == 0 && t.zero != nil { // someone waits
			close(t.zero)
			t.zero = nil
		}
	}
	t.mu.Unlock()
}

// wait blocks until no message is in flight or ctx ends.
func (t *tracker) wait(ctx context.Context) error {
	for {
		t.mu.Lock()
		n := len(t.items)
		if n == 0 {
			t.mu.Unlock()
			return nil
		}
		if t.zero == nil {
			t.zero = make(chan struct{})
		}
		z := t.zero
		t.mu.Unlock()
		select {
		case <-z:
		case <-ctx.Done():
			return ctxErr(ctx)
		}
	}
}

// nackAll nacks every message still in flight with reason.
func (t *tracker) nackAll(ctx context.Context, reason error) int {
	t.mu.Lock()
	its := make([]inflight, 0, len(t.items))
	for it := range t.items {
		its = append(its, it)
	}
	t.mu.Unlock()
	for _, it := range its {
		it.abort(ctx, reason)
	}
	return len(its)
}

// tracked is a message of the graph settling its source message src and
// counted in flight until then; one allocation per message.
type tracked[T, U any] struct {
	relay[U]
	src Message[T]
	t   *tracker
}

func (m *tracked[T, U]) Ack(ctx context.Context) error {
	defer m.t.done(m)
	return m.src.Ack(ctx)
}

func (m *tracked[T, U]) Nack(ctx context.Context, reason error, o NackOptions) error {
	defer m.t.done(m)
	return m.src.Nack(ctx, reason, withNackOptions(o))
}

func (m *tracked[T, U]) abort(ctx context.Context, reason error) { _ = m.msg.Nack(ctx, reason) }

// trackMessage returns a message of payload p settling m, counted in flight
// until settled.
func trackMessage[T, U any](t *tracker, m Message[T], p U) Message[U] {
	tm := &tracked[T, U]{src: m, t: t}
	out := tm.init(p, m.Metadata(), tm)
	t.add(tm)
	return out
}

// withNackOptions replays o as an option.
func withNackOptions(o NackOptions) NackOption {
	return func(dst *NackOptions) { *dst = o }
}
