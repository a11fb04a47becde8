// Package doccheck holds the module's checks of its own documentation and of the size of
// its public surface (surface_test.go). Package docs and comments must stand on their own,
// so no production Go file may send its reader to a steering file that is not in the module.
package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// outside names the files a reader of pkg.go.dev does not have.
var outside = regexp.MustCompile(`\b(RUNTIME|BROKER|CONTRACT|ARCHITECTURE|STYLE)\.md\b|\bCONTRACT §`)

func TestPackageDocsStandOnTheirOwn(t *testing.T) {
	root := filepath.Join("..", "..")
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", ".git", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if outside.MatchString(line) {
				bad = append(bad, path+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("production files cite documents outside the module; state the rule instead:\n%s", strings.Join(bad, "\n"))
	}
}
