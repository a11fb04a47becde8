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
	work  func() func(apulsar.Message) // each worker's handling function, made once per worker
	freed func()

	mu     sync.Mutex
	cond   *sync.Cond            // signalled when ready gains a message or the pool closes
	ready  readyQueue            // runnable messages, oldest first
	behind map[string][]poolItem // key in progress (or ready) → its later messages, in order
	seq    uint64
	closed bool
	wg     sync.WaitGroup
}

type poolItem struct {
	msg apulsar.Message
	key string
	seq uint64
}

// newWorkerPool starts n workers; each calls work once for its own handling function (which
// may keep state of that worker's, unlocked) and freed after each message.
func newWorkerPool(n int, work func() func(apulsar.Message), freed func()) *workerPool {
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
// An idle worker is woken after the lock is let go, so that it does not wake only to wait
// for the lock that submit still holds.
func (p *workerPool) submit(msg apulsar.Message, key string) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.seq++
	it := poolItem{msg: msg, key: key, seq: p.seq}
	if key != "" {
		if q, busy := p.behind[key]; busy {
			p.behind[key] = append(q, it)
			p.mu.Unlock()
			return true
		}
		p.behind[key] = nil // the key is now in progress (or about to be)
	}
	p.ready.push(it)
	p.mu.Unlock()
	p.cond.Signal()
	return true
}

func (p *workerPool) worker() {
	defer p.wg.Done()
	work := p.work()
	p.mu.Lock()
	for {
		for p.ready.len() == 0 && !p.closed {
			p.cond.Wait()
		}
		if p.ready.len() == 0 {
			p.mu.Unlock()
			return // closed, and nothing left to start
		}
		it := p.ready.pop()
		p.mu.Unlock()
		work(it.msg)
		// The slot is freed before the lock is taken again: freeing it may wake the receive
		// loop, which then submits, and should not find the lock held.
		p.freed()
		p.mu.Lock()
		p.finish(it)
	}
}

// finish releases a handled message, with p.mu held: the next message of its key becomes
// runnable.
func (p *workerPool) finish(it poolItem) {
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
	left := p.ready.drain()
	for _, q := range p.behind {
		for _, it := range q {
			left = append(left, it.msg)
		}
	}
	clear(p.behind)
	p.cond.Broadcast()
	return left
}

// readyQueue holds the runnable poolItems and yields them oldest first. Items come in two
// ways: a message submitted to the pool, always newer than any before it, and a keyed
// message released when its key's previous message finished, which may be older than
// items already queued. The first kind, nearly every item and all of them for messages
// without a key, goes to a FIFO ring in O(1); an item older than the ring's newest goes to
// a min-heap (O(log n)); pop takes the older of the two fronts. The ring and the heap are
// typed rather than container/list and container/heap, whose items are boxed into an
// interface (an allocation a message on the hot path).
type readyQueue struct {
	ring []poolItem // FIFO, ascending seq; its length is 0 or a power of two
	head int        // ring index of the oldest item
	n    int        // items in the ring
	heap itemHeap   // items older than the ring's newest when they came
}

// len returns the number of queued items.
func (q *readyQueue) len() int { return q.n + len(q.heap) }

// push adds it.
func (q *readyQueue) push(it poolItem) {
	if q.n > 0 && it.seq < q.ring[(q.head+q.n-1)&(len(q.ring)-1)].seq {
		q.heap.push(it)
		return
	}
	if q.n == len(q.ring) {
		grown := make([]poolItem, max(2*len(q.ring), 8))
		for i := range q.n {
			grown[i] = q.ring[(q.head+i)&(len(q.ring)-1)]
		}
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)&(len(q.ring)-1)] = it
	q.n++
}

// pop removes and returns the oldest item; the queue must not be empty.
func (q *readyQueue) pop() poolItem {
	if q.n == 0 || (len(q.heap) > 0 && q.heap[0].seq < q.ring[q.head].seq) {
		return q.heap.pop()
	}
	it := q.ring[q.head]
	q.ring[q.head] = poolItem{}
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.n--
	return it
}

// drain removes every item and returns their messages.
func (q *readyQueue) drain() []apulsar.Message {
	left := make([]apulsar.Message, 0, q.len())
	for i := range q.n {
		left = append(left, q.ring[(q.head+i)&(len(q.ring)-1)].msg)
	}
	for _, it := range q.heap {
		left = append(left, it.msg)
	}
	*q = readyQueue{}
	return left
}

// itemHeap is a min-heap of poolItems by seq.
type itemHeap []poolItem

// push adds it to the heap.
func (q *itemHeap) push(it poolItem) {
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
func (q *itemHeap) pop() poolItem {
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
