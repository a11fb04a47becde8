package envelope

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Identifiers drawn from the buffered random source by concurrent goroutines are all
// distinct: no byte of a refill is handed out twice, across refills and goroutines.
func TestRandomIdentifiersAreDistinct(t *testing.T) {
	const goroutines, each = 8, 5000
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			buf := make([]byte, 2*uuidLen)
			for range each {
				require.NoError(t, newUUIDs(buf))
				ids[g] = append(ids[g], string(buf[:uuidLen]), string(buf[uuidLen:]))
			}
		})
	}
	wg.Wait()
	seen := make(map[string]struct{}, goroutines*each*2)
	for _, list := range ids {
		for _, id := range list {
			_, dup := seen[id]
			require.False(t, dup, "identifier %s drawn twice", id)
			seen[id] = struct{}{}
		}
	}
	require.Len(t, seen, goroutines*each*2)
}

// readRandom hands out what it read and forgets it: the bytes left in the buffer after a
// read are the unread ones, and a request larger than what is left triggers a refill.
func TestReadRandomRefills(t *testing.T) {
	dst := make([]byte, randomChunk)
	for range 3 {
		require.NoError(t, readRandom(dst))
		require.NotEqual(t, make([]byte, randomChunk), dst, "a full chunk of zeros is not random")
	}
	small := make([]byte, 7)
	for range 2 * randomChunk / 7 {
		require.NoError(t, readRandom(small))
	}
}
