package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A module whose tests fail in each way a CI log shows: an error with file:line, a failing
// subtest, a panic, a build error, and a package that passes.
var sampleModule = map[string]string{
	"go.mod": "module example.com/sample\n\ngo 1.24\n",
	"a/a_test.go": `package a

import "testing"

func TestPlain(t *testing.T) { t.Errorf("want %d, got %d", 3, 2) }

func TestParent(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("bad", func(t *testing.T) { t.Log("context first"); t.Fatal("the subtest's reason") })
}

func TestPasses(t *testing.T) {}
`,
	"b/b_test.go": `package b

import "testing"

func TestPanics(t *testing.T) { var m map[string]int; m["x"] = 1 }
`,
	"c/c_test.go": `package c

import "testing"

func TestFine(t *testing.T) {}
`,
	"d/d_test.go": `package d

import "testing"

func TestBroken(t *testing.T) { undefinedCall() }
`,
}

func writeModule(t *testing.T) string {
	t.Helper()
	return writeFiles(t, sampleModule)
}

// writeFiles writes files (path → content) into a fresh directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goTest runs go test in the sample module and returns what it printed; it fails, by design.
func goTest(t *testing.T, dir string, args ...string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, append([]string{"test"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("go test %v passed; the sample module must fail:\n%s", args, out)
	}
	return string(out)
}

var wantSample = []string{
	"FAIL example.com/sample/a TestParent/bad: a_test.go:9: the subtest's reason",
	"FAIL example.com/sample/a TestPlain: a_test.go:5: want 3, got 2",
	"FAIL example.com/sample/b TestPanics: panic: assignment to entry in nil map",
	"FAIL example.com/sample/d: d/d_test.go:5:",
}

// TestRealGoTestOutput parses what go test really prints, plain and as JSON: each failing
// leaf once, with its own first error line, and nothing for the passing tests and package.
func TestRealGoTestOutput(t *testing.T) {
	dir := writeModule(t)
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"plain", []string{"./..."}},
		{"json", []string{"-json", "./..."}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			out := goTest(t, dir, mode.args...)
			fails, err := parse(strings.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range fails {
				got = append(got, row{failure: f, runs: 1}.format(1))
			}
			if !matches(got, wantSample) {
				t.Errorf("got\n%s\nwant\n%s\nfrom the output\n%s", strings.Join(got, "\n"), strings.Join(wantSample, "\n"), out)
			}
		})
	}
}

// matches compares line by line, each wanted line a prefix of the one got: the panic's
// "[recovered]" note and the compiler's column differ between Go versions.
func matches(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) {
			return false
		}
	}
	return true
}

func TestTestifyAssertionLine(t *testing.T) {
	out := "--- FAIL: TestX (0.00s)\n" +
		"    x_test.go:42: \n" +
		"        \tError Trace:\t/src/x_test.go:42\n" +
		"        \tError:      \tNot equal: \n" +
		"        \t            \texpected: 1\n" +
		"        \tTest:       \tTestX\n" +
		"FAIL\n" +
		"FAIL\texample.com/x\t0.010s\n"
	fails, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(fails) != 1 || fails[0].Line != "x_test.go:42: Not equal:" || fails[0].Package != "example.com/x" {
		t.Fatalf("got %+v", fails)
	}
}

// A package's build error printed right before another package's test block (go test
// prints each when it happens): the block keeps its own lines. TestRealGoTestOutput/plain
// met this order once in a flake hunt and lost its failures' reasons; this pins it.
func TestBuildErrorBeforeATestBlock(t *testing.T) {
	out := "# example.com/d [example.com/d.test]\n" +
		"d/d_test.go:5:33: undefined: undefinedCall\n" +
		"--- FAIL: TestPlain (0.00s)\n" +
		"    a_test.go:5: want 3, got 2\n" +
		"FAIL\n" +
		"FAIL\texample.com/a\t0.002s\n" +
		"FAIL\texample.com/d [build failed]\n"
	fails, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []failure{
		{Package: "example.com/a", Test: "TestPlain", Line: "a_test.go:5: want 3, got 2"},
		{Package: "example.com/d", Line: "d/d_test.go:5:33: undefined: undefinedCall"},
	}
	if !slices.Equal(fails, want) {
		t.Fatalf("got %+v\nwant %+v", fails, want)
	}
}

func TestPackageTimeout(t *testing.T) {
	out := "panic: test timed out after 10m0s\n\trunning tests:\n\t\tTestSlow (10m0s)\n\ngoroutine 1 [running]:\n" +
		"FAIL\texample.com/slow\t600.012s\n"
	fails, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(fails) != 1 || fails[0].Test != "" || fails[0].Line != "panic: test timed out after 10m0s" {
		t.Fatalf("got %+v", fails)
	}
}

// TestRunsAreCounted is make flake's view: a test that failed in two of three runs says so,
// with the line of the first run that failed, and the exit status says something failed.
func TestRunsAreCounted(t *testing.T) {
	dir := t.TempDir()
	fail := "--- FAIL: TestA (0.00s)\n    a_test.go:%s: boom\nFAIL\nFAIL\texample.com/a\t0.1s\n"
	files := []string{
		strings.ReplaceAll(fail, "%s", "1"),
		"ok  \texample.com/a\t0.1s\n",
		strings.ReplaceAll(fail, "%s", "2"),
	}
	var names []string
	for i, body := range files {
		p := filepath.Join(dir, string(rune('a'+i)))
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		names = append(names, p)
	}
	var stdout, stderr bytes.Buffer
	if code := run(names, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	want := "FAIL example.com/a TestA (2 of 3 runs): a_test.go:1: boom\n" +
		"testfails: 3 runs, 1 test failed at least once\n"
	if stdout.String() != want {
		t.Fatalf("got %q, want %q", stdout.String(), want)
	}

	stdout.Reset()
	if code := run(names[1:2], &stdout, &stderr); code != 0 || stdout.String() != "testfails: 1 run, no test failed\n" {
		t.Fatalf("a passing run: exit %d, %q", code, stdout.String())
	}
}

func TestMaxCutsTheList(t *testing.T) {
	var b strings.Builder
	for _, n := range []string{"A", "B", "C"} {
		b.WriteString("--- FAIL: Test" + n + " (0.00s)\n    x_test.go:1: " + n + "\n")
	}
	b.WriteString("FAIL\nFAIL\texample.com/x\t0.1s\n")
	p := filepath.Join(t.TempDir(), "run")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	run([]string{"-max", "2", "-title", "failed:", p}, &stdout, &stderr)
	want := "failed:\n" +
		"FAIL example.com/x TestA: x_test.go:1: A\n" +
		"FAIL example.com/x TestB: x_test.go:1: B\n" +
		"  (+1 more)\n" +
		"testfails: 1 run, 3 tests failed at least once\n"
	if stdout.String() != want {
		t.Fatalf("got %q, want %q", stdout.String(), want)
	}
}

func TestUnreadableFile(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{filepath.Join(t.TempDir(), "missing")}, &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stderr.String(), "missing") {
		t.Fatalf("stderr %q does not name the file", stderr.String())
	}
}

// ciScript drives .ci/lib.sh as .ci/run does: a step that passes, then a step that starts a
// process and a service and runs a failing go test after a page of other output.
const ciScript = `set -euo pipefail
cd "$REPO"
source .ci/lib.sh
go build -o "$logs/testfails" ./internal/cmd/testfails
step "a step that passes"
run echo fine
step "go test of a failing module"
sleep 300 >/dev/null 2>&1 &
echo $! >"$OUT/sleep.pid"
stops+=("echo stopped >$OUT/service")
for i in $(seq 100); do echo "other output $i"; done
cd "$MOD"
run go test ./...
echo "not reached"
`

// TestCIEndsWithTheFailure pins what .ci/run promises when a step fails: its last 30 lines
// name the step and each failing test with the line that says why, its last line names the
// logs it keeps, the services it started are stopped and no process it started outlives it.
func TestCIEndsWithTheFailure(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed: .ci/lib.sh needs it")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-c", ciScript)
	cmd.Env = append(os.Environ(), "REPO="+repo, "MOD="+writeModule(t), "OUT="+out, "GOFLAGS=-mod=mod", "GOWORK=off",
		"TMPDIR="+out, "CI_KEEP_LOGS=1")
	got, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() == 0 {
		t.Fatalf("want a non-zero exit, got %v:\n%s", err, got)
	}
	lines := strings.Split(strings.TrimRight(string(got), "\n"), "\n")
	tail := strings.Join(lines[max(0, len(lines)-30):], "\n")
	for _, want := range append([]string{"==> FAILED: go test of a failing module"}, wantSample...) {
		if !strings.Contains(tail, want) {
			t.Errorf("the last 30 lines lack %q:\n%s", want, tail)
		}
	}
	if strings.Contains(string(got), "not reached") {
		t.Error("the script went on after the failing step")
	}
	// The last line names the logs directory, kept with the failing step's log in it.
	const kept = "the run's logs (each step's, the real broker's): "
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, kept) {
		t.Errorf("the last line does not name the kept logs: %q", last)
	} else if logs, _ := filepath.Glob(filepath.Join(strings.TrimPrefix(last, kept), "*.log")); len(logs) < 2 {
		t.Errorf("the kept logs directory lacks the steps' logs: %v", logs)
	}
	if b, err := os.ReadFile(filepath.Join(out, "service")); err != nil || string(b) != "stopped\n" {
		t.Errorf("the service's stop command did not run: %q, %v", b, err)
	}
	pid, err := os.ReadFile(filepath.Join(out, "sleep.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
		if p, err := os.FindProcess(n); err == nil {
			t.Cleanup(func() { _ = p.Kill() })
		}
	}
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(pid))); err == nil {
		stat, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/stat")
		if !strings.Contains(string(stat), ") Z ") { // a zombie is gone, only not yet reaped
			t.Errorf("the step's background process %s outlived the run", strings.TrimSpace(string(pid)))
		}
	}
}

// TestTargetTally counts the leaves under "real" in a real JSON run of dual-target tests:
// the embedded halves and the parents do not count, skips and failures are named.
func TestTargetTally(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod": "module example.com/dual\n\ngo 1.24\n",
		"p/p_test.go": `package p

import "testing"

func each(t *testing.T, f func(t *testing.T)) {
	for _, n := range []string{"embedded", "real"} {
		t.Run(n, f)
	}
}

func TestOne(t *testing.T) { each(t, func(t *testing.T) {}) }

func TestTwo(t *testing.T) {
	each(t, func(t *testing.T) {
		t.Run("a", func(t *testing.T) {})
		t.Run("b", func(t *testing.T) {
			if t.Name() == "TestTwo/real/b" {
				t.Skip("the broker is not configured for it")
			}
		})
	})
}

func TestThree(t *testing.T) {
	each(t, func(t *testing.T) {
		if t.Name() == "TestThree/real" {
			t.Fatal("refused")
		}
	})
}

func TestEmbeddedOnly(t *testing.T) {}
`,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run1 := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(run1, []byte(goTest(t, dir, "-json", "./...")), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-target", "real", "-label", "real pulsar 4.0.7", run1}, &stdout, &stderr)
	want := "SKIP example.com/dual/p TestTwo/real/b: p_test.go:18: the broker is not configured for it\n" +
		"FAIL example.com/dual/p TestThree/real: p_test.go:27: refused\n" +
		"real pulsar 4.0.7: 2 passed, 1 failed, 1 skipped\n"
	if code != 1 || stdout.String() != want {
		t.Fatalf("exit %d, got\n%s\nwant\n%s\nstderr %s", code, stdout.String(), want, stderr.String())
	}
}

// TestRaceReportIsShown: a test that the race detector fails says only "race detected
// during execution of test"; the summary then shows the detector's first report, from a
// real go test -race run, plain and as JSON.
func TestRaceReportIsShown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the race detector")
	}
	dir := writeFiles(t, map[string]string{
		"go.mod": "module example.com/racy\n\ngo 1.24\n",
		"r/r_test.go": `package r

import (
	"sync"
	"testing"
)

func TestRacy(t *testing.T) {
	n := 0
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); n++ }()
	}
	wg.Wait()
	_ = n
}
`,
	})
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"plain", []string{"-race", "-count=1", "./..."}},
		{"json", []string{"-race", "-count=1", "-json", "./..."}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			out := goTest(t, dir, mode.args...)
			log := filepath.Join(t.TempDir(), "run.log")
			if err := os.WriteFile(log, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{log}, &stdout, &stderr); code != 1 {
				t.Fatalf("exit %d, want 1; stderr %s", code, stderr.String())
			}
			got := stdout.String()
			for _, want := range []string{
				"FAIL example.com/racy/r TestRacy",
				"--- the race detector's first report (of 1):",
				"  WARNING: DATA RACE",
				"r_test.go:",
			} {
				if !strings.Contains(got, want) {
					t.Errorf("the summary lacks %q:\n%s\nfrom the output\n%s", want, got, out)
				}
			}
			if !strings.HasPrefix(lastLine(got), "testfails: 1 run, 1 test failed") {
				t.Errorf("the summary does not end with the tally:\n%s", got)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
