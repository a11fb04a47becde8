// Command testfails says which tests failed in one or more go test runs, each with the first
// line that says why, so that the end of a long CI log names them.
//
// Usage:
//
//	go run ./internal/cmd/testfails [-max N] [-title T] FILE...
//
// Each FILE is one run: go test's plain output, go test -json or gotestsum's --jsonfile (a
// file may mix plain lines and events). Only the leaves are listed: a test whose subtest
// failed is not listed again, nor a package whose test failed; a package that failed outside
// its tests (a build error, a panic in TestMain, the test binary's timeout) is listed as the
// package. With one FILE a line reads
//
//	FAIL example.com/p TestX/sub: x_test.go:12: want 3, got 2
//
// and with several (the runs of make flake) each line says in how many of them it failed:
//
//	FAIL example.com/p TestX/sub (2 of 10 runs): x_test.go:12: want 3, got 2
//
// where the line is the one from the first run that failed. The last line counts them. At
// most -max tests are listed (default 20), the rest counted. Exit status: 0 when nothing
// failed, 1 when something did, 2 when a file could not be read.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testfails", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxTests := fs.Int("max", 20, "list at most `N` tests")
	title := fs.String("title", "", "a line printed before the list when something failed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 || *maxTests < 1 {
		fmt.Fprintln(stderr, "usage: testfails [-max N] [-title T] FILE...")
		return 2
	}
	runs := make([][]failure, 0, fs.NArg())
	for _, name := range fs.Args() {
		fails, err := parseFile(name)
		if err != nil {
			fmt.Fprintf(stderr, "testfails: %s: %v\n", name, err)
			return 2
		}
		runs = append(runs, fails)
	}
	rows := tally(runs)
	if len(rows) == 0 {
		fmt.Fprintf(stdout, "testfails: %s, no test failed\n", plural(len(runs), "run"))
		return 0
	}
	if *title != "" {
		fmt.Fprintln(stdout, *title)
	}
	for i, r := range rows {
		if i == *maxTests {
			fmt.Fprintf(stdout, "  (+%d more)\n", len(rows)-i)
			break
		}
		fmt.Fprintln(stdout, r.format(len(runs)))
	}
	fmt.Fprintf(stdout, "testfails: %s, %s failed at least once\n", plural(len(runs), "run"), plural(len(rows), "test"))
	return 1
}

func parseFile(name string) ([]failure, error) {
	f, err := os.Open(name) //nolint:gosec // reading the files named on the command line is the job
	if err != nil {
		return nil, err //nolint:wrapcheck // run names the file
	}
	defer func() { _ = f.Close() }()
	return parse(f)
}

// row is one test across the runs.
type row struct {
	failure
	runs int
}

func (r row) format(total int) string {
	name := r.Package
	if name == "" {
		name = "(package unknown)"
	}
	if r.Test != "" {
		name += " " + r.Test
	}
	if total > 1 {
		name += fmt.Sprintf(" (%d of %d runs)", r.runs, total)
	}
	if r.Line == "" {
		return "FAIL " + name
	}
	return "FAIL " + name + ": " + r.Line
}

// tally merges the runs' failures, keeping the first run's line for each test and the order
// in which they first failed.
func tally(runs [][]failure) []row {
	var rows []row
	index := map[string]int{}
	for _, fails := range runs {
		for _, f := range fails {
			if i, ok := index[f.key()]; ok {
				rows[i].runs++
				continue
			}
			index[f.key()] = len(rows)
			rows = append(rows, row{failure: f, runs: 1})
		}
	}
	return rows
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
