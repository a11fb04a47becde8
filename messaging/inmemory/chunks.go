package inmemory

// chunkSize is the capacity of one block of a chunks.
const chunkSize = 1024

// chunks is an append-only sequence stored in fixed-size blocks, with
// removal from the front: growing it never copies what it holds, which a
// single slice does at every doubling (and then while the garbage collector
// runs, behind write barriers). The zero value is empty.
type chunks[T any] struct {
	blocks [][]T // every block but the last is full
	head   int   // elements removed from blocks[0]
	n      int   // elements held
}

func (c *chunks[T]) len() int { return c.n }

func (c *chunks[T]) push(v T) {
	if len(c.blocks) == 0 || len(c.blocks[len(c.blocks)-1]) == chunkSize {
		c.blocks = append(c.blocks, make([]T, 0, chunkSize))
	}
	last := len(c.blocks) - 1
	c.blocks[last] = append(c.blocks[last], v)
	c.n++
}

// pop removes and returns the first element; c must not be empty.
func (c *chunks[T]) pop() T {
	var zero T
	b := c.blocks[0]
	v := b[c.head]
	b[c.head] = zero
	c.head++
	c.n--
	switch {
	case c.head == chunkSize: // a full block consumed
		c.blocks[0] = nil
		c.blocks = c.blocks[1:]
		c.head = 0
	case c.n == 0: // the only block consumed: reuse it
		c.blocks[0] = b[:0]
		c.head = 0
	}
	return v
}

// all returns a copy of the elements in order.
func (c *chunks[T]) all() []T {
	out := make([]T, 0, c.n)
	for i, b := range c.blocks {
		if i == 0 {
			b = b[c.head:]
		}
		out = append(out, b...)
	}
	return out
}
