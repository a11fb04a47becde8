package envelope

import (
	"crypto/rand"
	"fmt"
	"sync"
)

// randomChunk is how many bytes of the system's random source one refill reads: the
// identifiers of 64 envelopes.
const randomChunk = 64 * 2 * 16

// randomBuf holds bytes read from crypto/rand and not handed out yet. Each byte is handed
// out once: a buffer is used by one goroutine at a time (it is taken from the pool), and
// a buffer the pool drops takes its unread bytes with it.
type randomBuf struct {
	b   [randomChunk]byte
	off int
}

var randomPool = sync.Pool{New: func() any { return &randomBuf{off: randomChunk} }}

// readRandom fills dst (at most randomChunk bytes) from crypto/rand, reading the system's
// source once per randomChunk bytes rather than once per call: a getrandom system call per
// published message was the largest single cost of Make after the encoding itself.
func readRandom(dst []byte) error {
	r, _ := randomPool.Get().(*randomBuf) // the pool holds *randomBuf only
	if len(r.b)-r.off < len(dst) {
		if _, err := rand.Read(r.b[:]); err != nil {
			randomPool.Put(r)
			return fmt.Errorf("envelope: generate uuid: %w", err)
		}
		r.off = 0
	}
	n := copy(dst, r.b[r.off:])
	clear(r.b[r.off : r.off+n]) // handed out: not kept in memory beside the identifiers
	r.off += n
	randomPool.Put(r)
	return nil
}
