package pulsar

import (
	"context"
	"fmt"
	"sync"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
)

// senderCache creates one producer per topic on first use, without holding its lock during
// the creation (which blocks on the broker), counts the sends in progress on each, and closes
// an evicted producer once its last send returned. close closes them all.
type senderCache struct {
	create func(topic string) (seam.Sender, func(), error)
	mu     sync.Mutex
	m      map[string]*senderEntry
	closed bool
	wg     sync.WaitGroup // creations in progress
}

type senderEntry struct {
	ready   chan struct{}
	sender  seam.Sender
	closeFn func()
	err     error
	users   int  // sends in progress (guarded by the cache's mu)
	evicted bool // no longer in the map; close when users drops to 0
}

func newSenderCache(create func(string) (seam.Sender, func(), error)) *senderCache {
	if create == nil {
		create = func(topic string) (seam.Sender, func(), error) {
			return nil, nil, fmt.Errorf("pulsar: no producer can be created for %q", topic)
		}
	}
	return &senderCache{create: create, m: map[string]*senderEntry{}}
}

// get returns the producer of topic and the function to call when the send is done.
func (s *senderCache) get(ctx context.Context, topic string) (seam.Sender, func(), error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, ErrClosed
	}
	e := s.m[topic]
	if e == nil {
		e = &senderEntry{ready: make(chan struct{})}
		s.m[topic] = e
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			sender, closeFn, err := s.create(topic)
			s.mu.Lock()
			e.sender, e.closeFn, e.err = sender, closeFn, err
			if err != nil && s.m[topic] == e {
				delete(s.m, topic) // the next message tries again
			}
			s.mu.Unlock()
			close(e.ready)
		}()
	}
	e.users++
	s.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		s.release(e)
		return nil, nil, fmt.Errorf("pulsar: waiting for a producer for %q: %w", topic, ctx.Err())
	}
	if e.err != nil {
		s.release(e)
		return nil, nil, e.err
	}
	return e.sender, func() { s.release(e) }, nil
}

func (s *senderCache) release(e *senderEntry) {
	s.mu.Lock()
	e.users--
	closeNow := e.evicted && e.users == 0 && e.err == nil && e.closeFn != nil
	s.mu.Unlock()
	if closeNow {
		e.closeFn()
	}
}

// evict forgets the producer of topic when it is still sender; it is closed when its last
// send in progress returns.
func (s *senderCache) evict(topic string, sender seam.Sender) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[topic]
	if e == nil || e.sender != sender || s.closed {
		return
	}
	delete(s.m, topic)
	e.evicted = true
}

func (s *senderCache) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	entries := s.m
	s.m = map[string]*senderEntry{}
	s.mu.Unlock()
	for _, e := range entries {
		if e.err == nil && e.closeFn != nil {
			e.closeFn()
		}
	}
}
