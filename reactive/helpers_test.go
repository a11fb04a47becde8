package reactive_test

import (
	"sync"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// recorder is a test Subscriber recording every signal; it requests `initial`
// in OnSubscribe when initial > 0.
type recorder[T any] struct {
	initial int64

	mu        sync.Mutex
	sub       reactive.Subscription
	subs      int
	values    []T
	err       error
	completed bool
	done      chan struct{}
	once      sync.Once
	onNext    func(r *recorder[T], v T)
}

func newRecorder[T any](initial int64) *recorder[T] {
	return &recorder[T]{initial: initial, done: make(chan struct{})}
}

func (r *recorder[T]) OnSubscribe(s reactive.Subscription) {
	r.mu.Lock()
	r.sub = s
	r.subs++
	r.mu.Unlock()
	if r.initial > 0 {
		s.Request(r.initial)
	}
}

func (r *recorder[T]) OnNext(v T) {
	r.mu.Lock()
	r.values = append(r.values, v)
	f := r.onNext
	r.mu.Unlock()
	if f != nil {
		f(r, v)
	}
}

func (r *recorder[T]) OnError(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
	r.once.Do(func() { close(r.done) })
}

func (r *recorder[T]) OnComplete() {
	r.mu.Lock()
	r.completed = true
	r.mu.Unlock()
	r.once.Do(func() { close(r.done) })
}

func (r *recorder[T]) subscription() reactive.Subscription {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sub
}

func (r *recorder[T]) snapshot() (vals []T, completed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.values...), r.completed, r.err
}

func (r *recorder[T]) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		t.Fatal("no terminal signal within 5s")
	}
}

// eventuallyWithin bounds every testwait.Eventually of these tests.
const eventuallyWithin = 5 * time.Second
