package toolcheck

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateDeps = flag.Bool("update", false, "rewrite testdata/deps/*.txt from go list -deps")

// pinnedPackages are the packages whose dependency sets are pinned: what a user who imports
// only the codec, the binding or the idempotency guard compiles.
var pinnedPackages = []string{"envelope", "pulsar", "idempotency"}

// depsEnv fixes what decides a dependency set besides the imports, so that the pin is the
// same on every machine: the platform, cgo (on, as for a default linux/amd64 build; go
// list runs no C compiler) and no build tags from GOFLAGS.
var depsEnv = []string{"GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=1", "GOFLAGS=-mod=readonly"}

// TestDependenciesArePinned prints `go list -deps` of each pinned package (the packages
// outside the standard library, -v shows them) and fails, naming them, when a dependency
// appears that testdata/deps/<package>.txt does not list, or a listed one is gone. A new
// dependency is a decision: when it is one, rewrite the pins with
//
//	go test ./internal/toolcheck -run TestDependenciesArePinned -update
//
// and commit the diff with the reason.
func TestDependenciesArePinned(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// go test puts its own toolchain first on the test's PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	for _, pkg := range pinnedPackages {
		t.Run(pkg, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./"+pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), depsEnv...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v\n%s", pkg, err, stderr.String())
			}
			got := lines(string(out))
			// The list is printed after any failure, so that the failure's first line names
			// the new dependency.
			defer t.Logf("go list -deps ./%s: %d packages outside the standard library:\n%s", pkg, len(got), strings.Join(got, "\n"))

			pin := filepath.Join("testdata", "deps", pkg+".txt")
			if *updateDeps {
				header := "# go list -deps ./" + pkg + " (" + strings.Join(depsEnv[:3], " ") + "), the packages outside the standard library.\n" +
					"# Pinned by internal/toolcheck's TestDependenciesArePinned; rewrite with -update.\n"
				if err := os.MkdirAll(filepath.Dir(pin), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(pin, []byte(header+strings.Join(got, "\n")+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(pin)
			if err != nil {
				t.Fatalf("read the pin: %v (write it with -update)", err)
			}
			want := lines(string(b))
			if added := missing(got, want); len(added) > 0 {
				t.Errorf("./%s has %d new dependencies, not in %s:\n  %s\nIf each is a decision, rewrite the pins with -update and commit them with the reason.",
					pkg, len(added), pin, strings.Join(added, "\n  "))
			}
			if gone := missing(want, got); len(gone) > 0 {
				t.Errorf("./%s no longer depends on %d pinned packages:\n  %s\nRewrite the pins with -update so that a later return is noticed.",
					pkg, len(gone), strings.Join(gone, "\n  "))
			}
		})
	}
}

// lines returns the sorted non-empty lines of s that are not # comments.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// missing returns the entries of a that b lacks.
func missing(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}
