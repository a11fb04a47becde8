package pulsar

import (
	"sync"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// workerPool runs handlers on n goroutines without head-of-line blocking. Each received
// message is queued; an idle worker takes the oldest queued message whose key is not in
// progress, so one key is handled in the order received while a busy key (a slow handler, a
// blocked dead-letter write) holds back only its own messages. Messages without a key are
// taken by any idle worker, oldest first. The pool itself is unbounded: the consumer's
// in-flight gate (the one bound of Run and Next) admits a message before it is received,
// and freed is called as each message leaves the pool.
type workerPool struct {
	work  func(apulsar.Message)
	freed func()

	mu       sync.Mutex
	cond     *sync.Cond            // signalled when ready gains a message or the pool closes
	ready    readyQueue            // runnable messages, oldest first
	behind   map[string][]poolItem // key in progress (or ready) → its later messages, in order
	inflight int                   // messages in the pool: ready, behind, or in a worker
	seq      uint64
	closed   bool
	wg       sync.WaitGroup
}

type poolItem struct {
	msg apulsar.Message
	key string
	seq uint64
}

func newWorkerPool(n int, work func(apulsar.Message), freed func()) *workerPool {
	p := &workerPool{
		work:   work,
		freed:  freed,
		behind: map[string][]poolItem{},
	}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(n)
	for range n {
		go p.worker()
	}
	return p
}

// submit queues msg under key ("" for none); it reports false once the pool is closed.
func (p *workerPool) submit(msg apulsar.Message, key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.seq++
	it := poolItem{msg: msg, key: key, seq: p.seq}
	p.inflight++
	if key != "" {
		if q, busy := p.behind[key]; busy {
			p.behind[key] = append(q, it)
			return true
		}
		p.behind[key] = nil // the key is now in progress (or about to be)
	}
	p.ready.push(it)
	p.cond.Signal()
	return true
}

func (p *workerPool) worker() {
	defer p.wg.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for len(p.ready) == 0 && !p.closed {
			p.cond.Wait()
		}
		if len(p.ready) == 0 {
			return // closed, and nothing left to start
		}
		it := p.ready.pop()
		p.mu.Unlock()
		p.work(it.msg)
		p.mu.Lock()
		p.finish(it)
	}
}

// finish releases a handled message: the next message of its key becomes runnable.
func (p *workerPool) finish(it poolItem) {
	p.inflight--
	p.freed()
	if it.key == "" {
		return
	}
	q, ok := p.behind[it.key]
	switch {
	case !ok:
		return // the pool was closed: the key's later messages were handed back
	case len(q) == 0:
		delete(p.behind, it.key)
		return
	}
	next := q[0]
	q[0] = poolItem{}
	p.behind[it.key] = q[1:]
	p.ready.push(next)
	p.cond.Signal()
}

// close stops the pool: it takes no more messages, returns the queued ones not yet started
// (for the caller to negatively acknowledge, and to free their slots), and lets the workers finish the messages they
// hold. Wait for them with p.wg.Wait.
func (p *workerPool) close() []apulsar.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var left []apulsar.Message
	for _, it := range p.ready {
		left = append(left, it.msg)
	}
	p.ready = nil
	for _, q := range p.behind {
		for _, it := range q {
			left = append(left, it.msg)
		}
	}
	clear(p.behind)
	p.inflight -= len(left)
	p.cond.Broadcast()
	return left
}

// readyQueue is a min-heap of poolItems by arrival. It is typed rather than a
// container/heap, whose Push and Pop box every item into an interface (two allocations a
// message on the hot path).
type readyQueue []poolItem

// push adds it to the heap.
func (q *readyQueue) push(it poolItem) {
	h := append(*q, it)
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if h[parent].seq <= h[i].seq {
			break
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
	*q = h
}

// pop removes and returns the oldest item; the heap must not be empty.
func (q *readyQueue) pop() poolItem {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = poolItem{}
	h = h[:last]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].seq < h[least].seq {
			least = l
		}
		if r < len(h) && h[r].seq < h[least].seq {
			least = r
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	*q = h
	return top
}
