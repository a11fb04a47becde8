package envelope

import (
	"runtime"
	"testing"
)

// allocated returns the bytes that the heap hands out for one value made by alloc, and in
// how many objects: the growth of the runtime's counts of allocated bytes and objects over a
// number of calls, divided by it; the bytes are the size class of the value (plus its
// malloc header, when it has one). Each value is kept until the counts are read, so that
// none is freed in between. What anything else allocates meanwhile (the test runner, the
// race detector) can only add to the counts, so the least of a few tries is taken.
func allocated[T any](alloc func() T) (bytes, objects uint64) {
	const calls, tries = 256, 3
	keep := make([]T, calls)
	for try := range tries {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range keep {
			keep[i] = alloc()
		}
		runtime.ReadMemStats(&after)
		perBytes := (after.TotalAlloc - before.TotalAlloc) / calls
		perObjects := (after.Mallocs - before.Mallocs) / calls
		if try == 0 || perBytes < bytes {
			bytes = perBytes
		}
		if try == 0 || perObjects < objects {
			objects = perObjects
		}
	}
	runtime.KeepAlive(keep)
	return bytes, objects
}

// TestNewEnvelopeFillsTheSizeClass checks newEnvelope against the runtime's own size
// classes: for text lengths up to 8 KiB, the Envelope and its text take one allocation, no
// larger than what the runtime hands out for an object of that total size (a byte slice of
// it, one malloc header more above 512 B, where an object with pointers carries one), and
// no smaller than that total, so the text fits in it. The totals go up by 16, the narrowest
// class's width, and each is a multiple of 16, as every class is: each class is tried at its
// last size, where a class missing from newEnvelope's table, or a case that stops one size
// short, would round the allocation up to the next class or make two, and each at the first
// size past it, which a case reaching too far would put in too small a buffer. Past 8 KiB
// the text takes an allocation of its own.
func TestNewEnvelopeFillsTheSizeClass(t *testing.T) {
	for size := (envelopeSize/16 + 1) * 16; size <= 8192+16; size += 16 {
		n := size - envelopeSize
		if size > 512 {
			n -= mallocHeader
		}
		got, objects := allocated(func() *Envelope {
			e, buf := newEnvelope(n)
			if len(buf) != n {
				t.Fatalf("newEnvelope(%d): a buffer of %d bytes", n, len(buf))
			}
			return e
		})
		if size > 8192 {
			if objects != 2 {
				t.Fatalf("newEnvelope(%d) (%d bytes with the Envelope): %d allocations, want 2 past 8 KiB", n, size, objects)
			}
			continue
		}
		if objects != 1 {
			t.Fatalf("newEnvelope(%d) (%d bytes with the Envelope): %d allocations, want 1", n, size, objects)
		}
		want, _ := allocated(func() []byte { return make([]byte, size) })
		if got > want || got < uint64(size) {
			t.Fatalf("newEnvelope(%d) (%d bytes with the Envelope): %d bytes allocated, want at least %d and at most the %d of its size class", n, size, got, size, want)
		}
	}
}
