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
//
// With -target NAME and one JSON run it tallies instead the leaf tests that have a path
// element NAME (the real broker's halves of the dual-target tests, TestX/real/...): every
// skipped one with its reason, every failed one with its line, and a last line
//
//	real pulsar 4.0.7: 120 passed, 0 failed, 1 skipped
//
// whose prefix is -label (default NAME). Exit status 1 when one failed or none passed: a
// target that ran nothing has not been tested.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testfails", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxTests := fs.Int("max", 20, "list at most `N` tests")
	title := fs.String("title", "", "a line printed before the list when something failed")
	target := fs.String("target", "", "tally the leaf tests with the path element `NAME` instead")
	label := fs.String("label", "", "with -target, the last line's prefix (default NAME)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 || *maxTests < 1 {
		fmt.Fprintln(stderr, "usage: testfails [-max N] [-title T] FILE...")
		return 2
	}
	if *target != "" {
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "testfails: -target takes one run")
			return 2
		}
		if *label == "" {
			*label = *target
		}
		return tallyTarget(fs.Arg(0), *target, *label, stdout, stderr)
	}
	runs := make([][]failure, 0, fs.NArg())
	var races [][]string
	for _, name := range fs.Args() {
		p, err := parseRunFile(name)
		if err != nil {
			fmt.Fprintf(stderr, "testfails: %s: %v\n", name, err)
			return 2
		}
		runs = append(runs, p.result())
		races = append(races, p.races...)
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
	if len(races) > 0 {
		// A test the race detector failed names no cause; the report does.
		fmt.Fprintf(stdout, "--- the race detector's first report (of %d):\n", len(races))
		for _, l := range races[0] {
			fmt.Fprintln(stdout, "  "+l)
		}
	}
	fmt.Fprintf(stdout, "testfails: %s, %s failed at least once\n", plural(len(runs), "run"), plural(len(rows), "test"))
	return 1
}

func parseRunFile(name string) (*parser, error) {
	f, err := os.Open(name) //nolint:gosec // reading the files named on the command line is the job
	if err != nil {
		return nil, err //nolint:wrapcheck // run names the file
	}
	defer func() { _ = f.Close() }()
	return parseRun(f)
}

// tallyTarget prints the skipped and failed leaves under the path element target and the
// counts of all of them.
func tallyTarget(name, target, label string, stdout, stderr io.Writer) int {
	p, err := parseRunFile(name)
	if err != nil {
		fmt.Fprintf(stderr, "testfails: %s: %v\n", name, err)
		return 2
	}
	counts := map[string]int{}
	for _, v := range p.leafVerdicts(target) {
		counts[v.Action]++
		if v.Action != "pass" {
			fmt.Fprintln(stdout, strings.ToUpper(v.Action)+strings.TrimPrefix(row{failure: v.failure, runs: 1}.format(1), "FAIL"))
		}
	}
	fmt.Fprintf(stdout, "%s: %d passed, %d failed, %d skipped\n", label, counts["pass"], counts["fail"], counts["skip"])
	if counts["fail"] > 0 || counts["pass"] == 0 {
		return 1
	}
	return 0
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
