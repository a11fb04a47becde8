package inmemory

import (
	"slices"
	"testing"
)

func TestChunksKeepsOrderAcrossBlocks(t *testing.T) {
	var c chunks[int]
	var want []int
	next, popped := 0, 0
	// Interleave pushes and pops so that blocks fill, drain and are reused.
	for round := range 5 {
		for range chunkSize + 7*round {
			c.push(next)
			want = append(want, next)
			next++
		}
		if got := c.all(); !slices.Equal(got, want[popped:]) {
			t.Fatalf("round %d: all() = %d elements, want %d", round, len(got), len(want)-popped)
		}
		for range chunkSize/2 + round {
			if v := c.pop(); v != popped {
				t.Fatalf("round %d: pop() = %d, want %d", round, v, popped)
			}
			popped++
		}
		if c.len() != next-popped {
			t.Fatalf("round %d: len() = %d, want %d", round, c.len(), next-popped)
		}
	}
	for c.len() > 0 {
		if v := c.pop(); v != popped {
			t.Fatalf("drain: pop() = %d, want %d", v, popped)
		}
		popped++
	}
	if popped != next || len(c.all()) != 0 {
		t.Fatalf("drained %d of %d", popped, next)
	}
	c.push(42)
	if v := c.pop(); v != 42 {
		t.Fatalf("after drain: pop() = %d, want 42", v)
	}
}
