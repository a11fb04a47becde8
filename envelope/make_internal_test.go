package envelope

import "testing"

// TestReleaseDropsAGrownScratch: a scratch whose buffer, encoder buffer or key stack grew
// past its bound is not put back in the pool, so that one huge message does not pin its
// memory for the life of the process.
func TestReleaseDropsAGrownScratch(t *testing.T) {
	for name, grow := range map[string]func(*jsonScratch){
		"buffer":         func(sc *jsonScratch) { sc.b = make([]byte, 0, maxPooled+1) },
		"encoder buffer": func(sc *jsonScratch) { sc.buf.Grow(maxPooled + 1) },
		"key stack":      func(sc *jsonScratch) { sc.keys = make([]string, 0, maxPooled/16+1) },
	} {
		sc := getScratch()
		grow(sc)
		sc.release()
		if got, _ := scratchPool.Get().(*jsonScratch); got == sc {
			t.Errorf("a scratch whose %s grew past its bound went back to the pool", name)
		}
	}
}
