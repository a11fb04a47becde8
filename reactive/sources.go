package reactive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// FromSlice returns a cold Publisher: each subscriber gets vs in order, then
// OnComplete. The slice is not copied; do not modify it while subscribed.
func FromSlice[T any](vs ...T) Publisher[T] { return slicePublisher[T](vs) }

type slicePublisher[T any] []T

func (p slicePublisher[T]) Subscribe(s Subscriber[T]) {
	if s == nil {
		nilArg("subscriber")
	}
	i := 0
	vs := []T(p)
	NewOutlet(s, func(canEmit bool) (T, PollStatus, error) {
		var zero T
		if i >= len(vs) {
			vs = nil
			return zero, PollDone, nil
		}
		if !canEmit {
			return zero, PollEmpty, nil
		}
		v := vs[i]
		i++
		return v, PollReady, nil
	}, nil).Start()
}

// Empty returns a Publisher that signals OnSubscribe and OnComplete, without
// waiting for demand.
func Empty[T any]() Publisher[T] { return FromSlice[T]() }

// Failed returns a Publisher that signals OnSubscribe and then OnError(err),
// without waiting for demand. A nil err panics with [ErrNilArgument].
func Failed[T any](err error) Publisher[T] {
	if err == nil {
		nilArg("error")
	}
	return failedPublisher[T]{err: err}
}

type failedPublisher[T any] struct{ err error }

func (p failedPublisher[T]) Subscribe(s Subscriber[T]) {
	if s == nil {
		nilArg("subscriber")
	}
	NewOutlet(s, func(bool) (T, PollStatus, error) {
		var zero T
		return zero, PollDone, p.err
	}, nil).Start()
}

// FromFunc returns a Publisher that produces elements by calling next: one
// goroutine per subscription calls next once per unit of demand, never
// concurrently within a subscription. next returning io.EOF (also wrapped)
// completes the stream; any other error fails it. Cancel cancels the ctx given
// to next; the goroutine has exited before the subscription's Done closes.
// next must honour ctx, or Cancel waits for it to return.
func FromFunc[T any](next func(ctx context.Context) (T, error)) Publisher[T] {
	if next == nil {
		nilArg("next function")
	}
	return funcPublisher[T]{next: next}
}

type funcPublisher[T any] struct {
	next func(ctx context.Context) (T, error)
}

func (p funcPublisher[T]) Subscribe(s Subscriber[T]) {
	if s == nil {
		nilArg("subscriber")
	}
	startPump(s, p.next)
}

// pump is the state of one FromFunc/FromChan subscription: a goroutine
// fetches one value per wake-up; poll hands it to the Outlet.
type pump[T any] struct {
	out  *Outlet[T]
	want chan struct{} // capacity 1: one fetch at a time

	mu       sync.Mutex
	value    T
	has      bool
	fetching bool
	ended    bool
	err      error
}

func startPump[T any](s Subscriber[T], next func(ctx context.Context) (T, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pump[T]{want: make(chan struct{}, 1)}
	p.out = NewOutlet(s, p.poll, cancel)
	p.out.hold() // released when the goroutine exits
	go p.run(ctx, cancel, next)
	p.out.Start()
}

func (p *pump[T]) poll(canEmit bool) (T, PollStatus, error) {
	var zero T
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.has && canEmit:
		v := p.value
		p.value, p.has = zero, false
		return v, PollReady, nil
	case p.has:
		return zero, PollEmpty, nil
	case p.ended:
		return zero, PollDone, p.err
	case canEmit && !p.fetching:
		p.fetching = true
		p.want <- struct{}{} // never blocks: one fetch at a time
	}
	return zero, PollEmpty, nil
}

func (p *pump[T]) run(ctx context.Context, cancel context.CancelFunc, next func(ctx context.Context) (T, error)) {
	defer p.out.release()
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.want:
		}
		v, err := next(ctx)
		p.mu.Lock()
		p.fetching = false
		switch {
		case err == nil:
			p.value, p.has = v, true
		case errors.Is(err, io.EOF):
			p.ended = true
		default:
			p.ended, p.err = true, err
		}
		ended := p.ended
		p.mu.Unlock()
		p.out.Signal()
		if ended {
			return
		}
	}
}

// FromChan returns a unicast Publisher reading ch: it receives only while
// there is demand, completes when ch is closed, and on Cancel stops reading,
// leaving the remaining values in ch (a receive racing with Cancel may take
// one value that is then dropped). Every subscriber after the first gets
// OnSubscribe and OnError wrapping [ErrAlreadySubscribed].
func FromChan[T any](ch <-chan T) Publisher[T] {
	if ch == nil {
		nilArg("channel")
	}
	return &chanPublisher[T]{ch: ch}
}

type chanPublisher[T any] struct {
	ch         <-chan T
	subscribed atomic.Bool
}

func (p *chanPublisher[T]) Subscribe(s Subscriber[T]) {
	if s == nil {
		nilArg("subscriber")
	}
	if !p.subscribed.CompareAndSwap(false, true) {
		Failed[T](fmt.Errorf("%w: FromChan", ErrAlreadySubscribed)).Subscribe(s)
		return
	}
	ch := p.ch
	startPump(s, func(ctx context.Context) (T, error) {
		var zero T
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		select {
		case v, ok := <-ch:
			if !ok {
				return zero, io.EOF
			}
			return v, nil
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	})
}
