package workspace

import (
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nested are the workspace modules whose tests this package runs, as patterns relative to
// the repository root. Every module listed in go.work besides the root belongs here.
var nested = []string{"./examples/..."}

// forwarded are the test flags of the outer run that the nested run gets too.
var forwarded = map[string]bool{"test.count": true, "test.shuffle": true, "test.short": true, "test.failfast": true}

func TestWorkspaceModules(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "go.work")
	if _, err := os.Stat(work); err != nil {
		t.Fatalf("the repository's go.work is missing (%v): the examples module and the README's `go run ./examples/quickstart` need it", err)
	}
	// go test puts its own toolchain first on the test's PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	args := []string{"test"}
	flag.Visit(func(f *flag.Flag) {
		if forwarded[f.Name] {
			args = append(args, "-"+strings.TrimPrefix(f.Name, "test.")+"="+f.Value.String())
		}
	})
	if raceEnabled {
		args = append(args, "-race")
	}
	if deadline, ok := t.Deadline(); ok {
		// Leave the outer test a margin to report the nested run's output.
		left := time.Until(deadline) - 30*time.Second
		if left <= 0 {
			t.Fatalf("no time left for the nested run before the outer -timeout")
		}
		args = append(args, "-timeout="+left.Round(time.Second).String())
	}
	args = append(args, nested...)

	recordInputs(t, root)

	cmd := exec.CommandContext(t.Context(), goBin, args...)
	cmd.Dir = root
	// The workspace even when the outer run had GOWORK=off: the nested modules' patterns
	// resolve only in workspace mode.
	cmd.Env = append(os.Environ(), "GOWORK="+work)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s (in the repository root, GOWORK=go.work): %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("go %s:\n%s", strings.Join(args, " "), out)
}

// nestedEnv are the variables the nested modules' tests read; with every variable that is
// set, they are part of the cached result's key (see recordInputs).
var nestedEnv = []string{"PULSAR_URL", "PULSAR_ADMIN_URL", "REAL_PULSAR_REQUIRED", "REDIS_ADDR", "CI", "GOFLAGS", "GOEXPERIMENT", "CGO_ENABLED"}

// recordInputs makes go test's result cache see what the nested run depends on. The cache
// keys a package's result on its test binary and on the files and variables the test itself
// touched; this test's binary does not change when an example or a package it builds on
// does, so without this a cached "ok" would hide an example broken since. Every file of the
// repository (outside .git) is stat'ed and the variables are read, so that a change to any
// of them reruns the nested tests.
func recordInputs(t *testing.T, root string) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		os.Getenv(name)
	}
	for _, name := range nestedEnv {
		os.Getenv(name)
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		_, err = os.Stat(path)
		return err
	})
	if err != nil {
		t.Fatalf("record the nested run's inputs: %v", err)
	}
}
