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
	mu   sync.Mutex
	list trackNode     // sentinel of the ring of tracked messages, in order of entry
	n    int           // messages in flight
	zero chan struct{} // created by a waiter, closed when no message is in flight
}

// trackNode links a tracked message into its tracker's ring: adding and
// removing it costs no allocation and no hashing.
type trackNode struct {
	prev, next *trackNode
	it         inflight
}

// inflight is a tracked message: abort nacks it at the shutdown deadline.
type inflight interface {
	abort(ctx context.Context, reason error)
}

func newTracker() *tracker {
	t := &tracker{}
	t.list.prev, t.list.next = &t.list, &t.list
	return t
}

// add tracks it through its node nd.
func (t *tracker) add(nd *trackNode, it inflight) {
	t.mu.Lock()
	nd.it = it
	nd.prev, nd.next = t.list.prev, &t.list
	t.list.prev.next = nd
	t.list.prev = nd
	t.n++
	t.mu.Unlock()
}

// done stops tracking the message of nd; a second call is a no-op.
func (t *tracker) done(nd *trackNode) {
	t.mu.Lock()
	if nd.next != nil {
		nd.prev.next, nd.next.prev = nd.next, nd.prev
		nd.prev, nd.next = nil, nil
		t.n--
		if t.n == 0 && t.zero != nil { // someone waits
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
		if t.n == 0 {
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

// nackAll nacks every message still in flight with reason, oldest first.
func (t *tracker) nackAll(ctx context.Context, reason error) int {
	t.mu.Lock()
	its := make([]inflight, 0, t.n)
	for nd := t.list.next; nd != &t.list; nd = nd.next {
		its = append(its, nd.it)
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
	node trackNode
	src  Message[T]
	t    *tracker
}

// Ack and Nack run at most once (the settlement's guard), so they can drop
// src: a settled message kept by its receiver no longer holds the source's.

func (m *tracked[T, U]) Ack(ctx context.Context) error {
	defer m.t.done(&m.node)
	src := m.src
	m.src = nil
	return src.Ack(ctx)
}

func (m *tracked[T, U]) Nack(ctx context.Context, reason error, o NackOptions) error {
	defer m.t.done(&m.node)
	src := m.src
	m.src = nil
	return src.Nack(ctx, reason, withNackOptions(o))
}

func (m *tracked[T, U]) abort(ctx context.Context, reason error) { _ = m.msg.Nack(ctx, reason) }

// trackMessage returns a message of payload p settling m, counted in flight
// until settled.
func trackMessage[T, U any](t *tracker, m Message[T], p U) Message[U] {
	tm := &tracked[T, U]{src: m, t: t}
	out := tm.init(p, m.Metadata(), tm)
	t.add(&tm.node, tm)
	return out
}

// withNackOptions replays o as an option.
func withNackOptions(o NackOptions) NackOption {
	return func(dst *NackOptions) { *dst = o }
}
