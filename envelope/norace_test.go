//go:build !race

package envelope_test

// raceEnabled is set when the tests run under the race detector, which slows the decoder
// several times and adds allocations, so time bounds and allocation counts are not checked.
const raceEnabled = false
