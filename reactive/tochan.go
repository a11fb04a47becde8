package reactive

import (
	"context"
	"fmt"
	"sync"
)

// ToChan subscribes to p and returns a channel of its values and a channel for
// its outcome. It requests buffer values (at least 1) up front, then one more
// for each value the receiver takes. The value channel closes after the
// terminal signal (all received values delivered first); the error channel then
// yields one value (nil, the stream error or ctx.Err()) and closes. ctx done
// cancels the subscription. One goroutine per call forwards the values; it
// ends at the terminal signal or when ctx is done, so a caller that stops
// receiving must cancel ctx.
func ToChan[T any](ctx context.Context, p Publisher[T], buffer int) (<-chan T, <-chan error) {
	if p == nil {
		nilArg("publisher")
	}
	c := newChanSubscriber[T](buffer)
	go c.run(ctx)
	p.Subscribe(c)
	return c.out, c.errc
}

// chanSubscriber is ToChan's Subscriber: OnNext puts values into a queue of
// buffer slots (never blocking: the Inlet requested no more than that); the
// forwarding goroutine hands them to the receiver and requests one per value.
type chanSubscriber[T any] struct {
	in     *Inlet
	buffer int64
	nilc   nilCheck[T]
	queue  chan T
	term   chan struct{}
	once   sync.Once
	err    error // written before term closes
	out    chan T
	errc   chan error
}

func newChanSubscriber[T any](buffer int) *chanSubscriber[T] {
	buffer = max(buffer, 1)
	return &chanSubscriber[T]{
		in:     NewInlet(0),
		buffer: int64(buffer),
		nilc:   newNilCheck[T](),
		queue:  make(chan T, buffer),
		term:   make(chan struct{}),
		out:    make(chan T),
		errc:   make(chan error, 1),
	}
}

func (c *chanSubscriber[T]) OnSubscribe(s Subscription) {
	if c.in.OnSubscribe(s) {
		c.in.Request(c.buffer)
	}
}

func (c *chanSubscriber[T]) OnNext(v T) {
	c.nilc.check(v)
	select {
	case c.queue <- v:
	default:
		c.in.Cancel()
		c.terminate(fmt.Errorf("%w: ToChan received more than the %d values it requested", ErrMissingDemand, c.buffer))
	}
}

func (c *chanSubscriber[T]) OnError(err error) {
	if err == nil {
		nilArg("error")
	}
	c.in.Terminated()
	c.terminate(err)
}

func (c *chanSubscriber[T]) OnComplete() {
	c.in.Terminated()
	c.terminate(nil)
}

func (c *chanSubscriber[T]) terminate(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.term)
	})
}

func (c *chanSubscriber[T]) run(ctx context.Context) {
	defer close(c.errc)
	defer close(c.out)
	for {
		select {
		case v := <-c.queue:
			if !c.send(ctx, v) {
				return
			}
		case <-c.term:
			for {
				select {
				case v := <-c.queue:
					if !c.send(ctx, v) {
						return
					}
				default:
					c.errc <- c.err
					return
				}
			}
		case <-ctx.Done():
			c.in.Cancel()
			c.errc <- ctx.Err()
			return
		}
	}
}

func (c *chanSubscriber[T]) send(ctx context.Context, v T) bool {
	select {
	case c.out <- v:
		c.in.Request(1)
		return true
	case <-ctx.Done():
		c.in.Cancel()
		c.errc <- ctx.Err()
		return false
	}
}
