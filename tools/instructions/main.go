// Command instructions counts the instructions a message of two benchmarks of one test
// binary under Valgrind's cachegrind, and prints the difference, in total and function by
// function. `make bench-instructions` runs it on the SDK's pipeline and its contract floor
// (BenchmarkPipelineSuccess against BenchmarkPipelineFloor, package pulsar):
//
//	make bench-instructions
//
// which builds the test binary and then runs, from the tools module:
//
//	cd tools && GOWORK=off go run ./instructions -bin PULSAR_TEST_BINARY -dir ../pulsar
//
// Two other benchmarks of the package are named by -first and -second (make:
// BENCH_FIRST and BENCH_SECOND), without their Benchmark prefix, a sub-benchmark after a
// slash; each level is matched whole:
//
//	make bench-instructions BENCH_FIRST=PublishPath/recycled BENCH_SECOND=PublishFloor
//
// # Why instructions
//
// Timing the engine's own work a message, tens of nanoseconds, needs a quiet machine: on a
// shared virtual machine two runs of the same benchmark can differ by a fifth. The number
// of instructions executed does not depend on the machine's load: the same binary and the
// same input give the same count. It is not the time (an atomic or a cache miss costs more
// than an addition), but a change that removes instructions from the engine shows here
// whatever the noise, and one that adds them too.
//
// # How
//
// Each benchmark runs twice under cachegrind (--cache-sim=no), with -test.benchtime=Nx for
// the two counts of -n, GOGC=off (no collection, whose work depends on the heap's history)
// and GOMAXPROCS=1. The instructions a message are the slope between the two runs, so that
// whatever a run does once (the binary's start, the benchmark's set-up) cancels out: for the
// whole program and for each function. The difference of two benchmarks is then what the
// first runs a message that the second does not, function by function; a function is listed
// when it differs by at least -min instructions a message.
//
// Valgrind must be installed (Debian: apt-get install valgrind); without it the command
// says so and fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "instructions:", err)
		os.Exit(1)
	}
}

type options struct {
	bin, dir, first, second string
	counts                  [2]int
	min                     float64
	top                     int
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("instructions", flag.ContinueOnError)
	var o options
	var n string
	fs.StringVar(&o.bin, "bin", "", "the test binary (go test -c -o BIN ./pulsar)")
	fs.StringVar(&o.dir, "dir", ".", "the directory the binary runs in (its package's)")
	fs.StringVar(&o.first, "first", "PipelineSuccess", "the benchmark whose extra instructions are counted: its name without Benchmark, a sub-benchmark after a slash")
	fs.StringVar(&o.second, "second", "PipelineFloor", "the benchmark it is set against, named the same way")
	fs.StringVar(&n, "n", "100000,300000", "the two iteration counts, comma-separated")
	fs.Float64Var(&o.min, "min", 1, "list a function that differs by at least this many instructions a message")
	fs.IntVar(&o.top, "top", 25, "list at most this many functions")
	if err := fs.Parse(args); err != nil {
		return o, err //nolint:wrapcheck // the flag package's own message
	}
	if o.bin == "" {
		return o, errors.New("-bin is required: the test binary to run")
	}
	if o.first == "" || o.second == "" {
		return o, errors.New("-first and -second name a benchmark each")
	}
	parts := strings.Split(n, ",")
	if len(parts) != 2 {
		return o, fmt.Errorf("-n %q: want two counts, comma-separated", n)
	}
	for i, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 {
			return o, fmt.Errorf("-n %q: %q is not a positive count", n, p)
		}
		o.counts[i] = v
	}
	if o.counts[0] >= o.counts[1] {
		return o, fmt.Errorf("-n %q: the second count must be the larger", n)
	}
	return o, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("valgrind"); err != nil {
		return errors.New("valgrind not found: install it (Debian: apt-get install valgrind)")
	}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return fmt.Errorf("-bin: %w", err)
	}
	tmp, err := os.MkdirTemp("", "instructions")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	var perMsg [2]counts
	for i, name := range []string{o.first, o.second} {
		bench := benchPattern(name)
		var runs [2]counts
		for j, n := range o.counts {
			file := filepath.Join(tmp, fmt.Sprintf("cg.%d.%d", i, j))
			if err := cachegrind(ctx, bin, o.dir, bench, n, file); err != nil {
				return err
			}
			if runs[j], err = readCounts(file); err != nil {
				return err
			}
		}
		perMsg[i] = slope(runs[0], runs[1], o.counts[1]-o.counts[0])
	}
	report(out, o, perMsg[0], perMsg[1])
	return nil
}

// readCounts reads the cachegrind output file.
func readCounts(file string) (counts, error) {
	f, err := os.Open(file) //nolint:gosec // G304: the file cachegrind just wrote, in our temporary directory
	if err != nil {
		return counts{}, fmt.Errorf("cachegrind's output: %w", err)
	}
	defer f.Close()
	c, err := parseCachegrind(f)
	if err != nil {
		return c, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

// benchPattern returns the -test.bench pattern that selects the benchmark name alone:
// "PublishPath/recycled" is BenchmarkPublishPath's sub-benchmark recycled, and not
// recycled_header beside it. Each level is matched whole, its text taken literally.
func benchPattern(name string) string {
	levels := strings.Split(name, "/")
	for i, l := range levels {
		if i == 0 {
			l = "Benchmark" + l
		}
		levels[i] = "^" + regexp.QuoteMeta(l) + "$"
	}
	return strings.Join(levels, "/")
}

// cachegrind runs the benchmarks of bin that match bench for n iterations under cachegrind,
// writing its counts to file.
func cachegrind(ctx context.Context, bin, dir, bench string, n int, file string) error {
	//nolint:gosec // G204: the command line is the user's own flags, run on their machine
	cmd := exec.CommandContext(ctx, "valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file="+file,
		bin, "-test.run=^$", "-test.bench="+bench, fmt.Sprintf("-test.benchtime=%dx", n), "-test.cpu=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOGC=off", "GOMAXPROCS=1")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("valgrind %s, %d iterations: %w\n%s", bench, n, err, msg)
	}
	return nil
}

// report prints the instructions a message of both benchmarks and their difference, whole
// and by function, the largest differences first.
func report(out io.Writer, o options, first, second counts) {
	fmt.Fprintf(out, "instructions a message (cachegrind; GOGC=off, GOMAXPROCS=1; slope of %d and %d iterations):\n",
		o.counts[0], o.counts[1])
	fmt.Fprintf(out, "  %s: %.0f\n  %s: %.0f\n  difference: %.0f\n\n", o.first, first.total, o.second, second.total,
		first.total-second.total)
	type row struct {
		fn   string
		diff float64
	}
	var rows []row
	for fn, v := range first.byFunc {
		if d := v - second.byFunc[fn]; d >= o.min || d <= -o.min {
			rows = append(rows, row{fn, d})
		}
	}
	for fn, v := range second.byFunc {
		if _, ok := first.byFunc[fn]; !ok && v >= o.min {
			rows = append(rows, row{fn, -v})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].diff != rows[j].diff {
			return rows[i].diff > rows[j].diff
		}
		return rows[i].fn < rows[j].fn
	})
	fmt.Fprintf(out, "by function (at least %g a message; the first %d):\n", o.min, o.top)
	for i, r := range rows {
		if i == o.top {
			fmt.Fprintf(out, "  … %d more\n", len(rows)-o.top)
			break
		}
		fmt.Fprintf(out, "  %+8.0f  %s\n", r.diff, r.fn)
	}
}
