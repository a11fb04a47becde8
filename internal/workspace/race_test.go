//go:build race

package workspace

// raceEnabled: this test binary was built with -race, so the nested run is too.
const raceEnabled = true
