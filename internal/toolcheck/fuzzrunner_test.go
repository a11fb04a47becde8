// Package toolcheck holds the module's checks of its own build: its scripts, which run in
// CI, so a mistake in one fails (or, worse, passes) every submission; and the dependency
// sets it promises, pinned in testdata/deps, so that a new dependency of envelope, pulsar
// or idempotency is a decision and never an accident.
package toolcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo stands in for the go command in tools/fuzz/run.sh: it lists one fuzz target and
// answers each fuzzing run as $MODE says, counting the runs in $STATE.
const fakeGo = `#!/usr/bin/env bash
case "$1 $2" in
  "test -list") echo FuzzX; echo "ok  	example.com/p	0.1s"; exit 0;;
  "list -f") echo "$PKGDIR"; exit 0;;
esac
n=$(cat "$STATE" 2>/dev/null || echo 0)
echo $((n + 1)) > "$STATE"
race() { printf -- '--- FAIL: FuzzX (11.09s)\n    context deadline exceeded\nFAIL\nexit status 1\n'; exit 1; }
case "$MODE" in
  race-once) [ "$n" -eq 0 ] && race;;
  race-always) race;;
  crasher)
    mkdir -p "$PKGDIR/testdata/fuzz/FuzzX" && echo 'go test fuzz v1' > "$PKGDIR/testdata/fuzz/FuzzX/$n"
    race;;
  target-deadline)
    printf -- '--- FAIL: FuzzX (2.00s)\n    x_test.go:12: context deadline exceeded\nFAIL\n'; exit 1;;
esac
echo PASS
`

func TestFuzzRunnerRepeatsOnlyTheCoordinatorRace(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed: tools/fuzz/run.sh needs it")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "tools", "fuzz", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		mode   string
		ok     bool
		runs   string
		repeat int // "fuzzing it again" lines
	}{
		{"pass", true, "1", 0},
		{"race-once", true, "2", 1},
		{"race-always", false, "3", 2},     // at most two repeats, then the failure stands
		{"crasher", false, "1", 0},         // an input was written: a finding, never repeated
		{"target-deadline", false, "1", 0}, // the target's own deadline (file:line): a finding
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			dir := t.TempDir()
			fake := filepath.Join(dir, "go")
			if err := os.WriteFile(fake, []byte(fakeGo), 0o700); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(dir, "state")
			cmd := exec.CommandContext(t.Context(), bash, script)
			cmd.Env = append(os.Environ(), "GO="+fake, "FUZZTIME=1s", "MODE="+c.mode,
				"STATE="+state, "PKGDIR="+filepath.Join(dir, "pkg"))
			out, err := cmd.CombinedOutput()
			if ok := err == nil; ok != c.ok {
				t.Fatalf("run.sh succeeded = %v, want %v (err %v); output:\n%s", ok, c.ok, err, out)
			}
			runs, err := os.ReadFile(state)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(runs)); got != c.runs {
				t.Errorf("the target was fuzzed %s times, want %s; output:\n%s", got, c.runs, out)
			}
			if got := strings.Count(string(out), "fuzzing it again"); got != c.repeat {
				t.Errorf("%d repeats announced, want %d; output:\n%s", got, c.repeat, out)
			}
		})
	}
}
