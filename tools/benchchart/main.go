// Command benchchart draws the judged rows of a `make bench-compare` run as an SVG chart.
//
// The harness (internal/benchcompare) writes its judged rows as JSON when BENCH_JSON names
// a file; `make bench-compare` does that and then runs this command, from the tools
// module, so that the SDK's own module carries no plotting dependencies:
//
//	cd tools && GOWORK=off go run ./benchchart -in judged.json -out chart.svg
//
// # What the chart shows
//
// The title says what the chart shows, which broker the run used (and so whether the
// broker's CPU is in the figures) and the run's parameters: messages a window, repeats,
// GOMAXPROCS, platform and date. Below it, one panel per table of the rows (the SDK
// against its reference, absolute targets, what bqotel adds, …), and in a panel one line
// per row: its median as a dot, its 95 % interval of the median as an error bar, both
// coloured by the harness's verdict (green met, red not met, orange undecided), and its
// label: the comparison, the variant against its reference, and the raw figures with the
// target and the verdict.
//
// The rows have different targets and units (ratios of at most 1.03 or at least 1.10, µs
// of CPU), so every row is drawn on one scale on which its target is 1 and less is
// better: figure/target for a row whose figure must be at most its target, target/figure
// for one whose figure must be at least its target (so the interval of a throughput ratio
// turns round: its low end is target/hi). The target is the dashed vertical line at 1; a
// row that also bounds its interval's upper end (hi_max, the consume row's 1.08) has that
// bound as a short dashed tick on the same scale. A row is met where its whole bar lies
// left of the line. Each panel has its own x range, so that a row far from its target (a
// tracing cost several times its target) does not squash the others. The chart never
// judges: the verdicts are the harness's, as the JSON gives them.
//
// A row without an interval (fewer than 6 repeats) is drawn as a dot alone. The input is
// checked before anything is drawn (parseJudged); a file the chart cannot draw sensibly is
// an error, not a chart.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// maxInput bounds the JSON read: a run writes a few kB.
const maxInput = 4 << 20

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run reads the JSON named by -in and writes the chart to -out.
func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchchart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "the judged rows, as make bench-compare writes them with BENCH_JSON (required)")
	out := fs.String("out", "", "the SVG file to write (required)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("benchchart: %w", err)
	}
	if *in == "" || *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("benchchart: -in and -out are required, and nothing else")
	}
	data, err := readLimited(*in)
	if err != nil {
		return err
	}
	f, err := parseJudged(data)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	svg, err := render(f)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, svg, 0o600); err != nil {
		return fmt.Errorf("benchchart: %w", err)
	}
	return nil
}

// readLimited reads the file at path, refusing one over maxInput bytes.
func readLimited(path string) ([]byte, error) {
	fh, err := os.Open(path) //nolint:gosec // the path is the caller's own -in flag
	if err != nil {
		return nil, fmt.Errorf("benchchart: %w", err)
	}
	defer func() { _ = fh.Close() }()
	data, err := io.ReadAll(io.LimitReader(fh, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("benchchart: reading %s: %w", path, err)
	}
	if len(data) > maxInput {
		return nil, fmt.Errorf("benchchart: %s is over %d bytes", path, maxInput)
	}
	return data, nil
}
