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
	items map[*token]func(ctx context.Context, reason error)
	zero  chan struct{} // closed while no message is in flight
}

type token struct{ _ byte }

func newTracker() *tracker {
	z := make(chan struct{})
	close(z)
	return &tracker{items: map[*token]func(context.Context, error){}, zero: z}
}

func (t *tracker) add(tok *token, nack func(ctx context.Context, reason error)) {
	t.mu.Lock()
	if len(t.items) == 0 {
		t.zero = make(chan struct{})
	}
	t.items[tok] = nack
	t.mu.Unlock()
}

func (t *tracker) done(tok *token) {
	t.mu.Lock()
	if _, ok := t.items[tok]; ok {
		delete(t.items, tok)
		if len(t.items) == 0 {
			close(t.zero)
		}
	}
	t.mu.Unlock()
}

// wait blocks until no message is in flight or ctx ends.
func (t *tracker) wait(ctx context.Context) error {
	for {
		t.mu.Lock()
		z := t.zero
		n := len(t.items)
		t.mu.Unlock()
		if n == 0 {
			return nil
		}
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
	fs := make([]func(context.Context, error), 0, len(t.items))
	for _, f := range t.items {
		fs = append(fs, f)
	}
	t.mu.Unlock()
	for _, f := range fs {
		f(ctx, reason)
	}
	return len(fs)
}

// trackMessage returns a message of payload p settling m, counted in flight
// until settled.
func trackMessage[T, U any](t *tracker, m Message[T], p U) Message[U] {
	tok := &token{}
	out := NewMessage(p, WithMetadata(m.Metadata()),
		WithAckFunc(func(ctx context.Context) error {
			defer t.done(tok)
			return m.Ack(ctx)
		}),
		WithNackFunc(func(ctx context.Context, reason error, o NackOptions) error {
			defer t.done(tok)
			return m.Nack(ctx, reason, withNackOptions(o))
		}))
	t.add(tok, func(ctx context.Context, reason error) { _ = out.Nack(ctx, reason) })
	return out
}

// withNackOptions replays o as an option.
func withNackOptions(o NackOptions) NackOption {
	return func(dst *NackOptions) { *dst = o }
}
