//go:build !race

package workspace

// raceEnabled: this test binary was built without -race.
const raceEnabled = false
