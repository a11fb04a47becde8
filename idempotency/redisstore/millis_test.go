package redisstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A lease, a TTL or a fence retention reaches Redis in whole milliseconds, rounded up and
// at least 1, so that the server never holds an id for less than the guard asked: a time
// bound on PTTL could not tell a lease 2 ms short, so the rounding is held here.
func TestMillisRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		0:                                    1,
		time.Nanosecond:                      1,
		time.Millisecond:                     1,
		time.Millisecond + time.Nanosecond:   2,
		1500 * time.Microsecond:              2,
		2*time.Millisecond - time.Nanosecond: 2,
		time.Minute:                          60_000,
	} {
		assert.Equal(t, want, millis(d), "%s", d)
	}
}
