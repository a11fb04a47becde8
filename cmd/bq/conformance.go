package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/babelqueue/babelqueue-go-pulsar/conformance"
)

// runConformance implements `bq conformance`.
func runConformance(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bq conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	suite := fs.String("suite", "", "suite `directory` holding manifest.json and fixtures/ (required)")
	skipUnknown := fs.Bool("skip-unknown", false, "report blocks this runner does not understand as skipped instead of failing")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bq conformance --suite DIR [--skip-unknown]

Runs every block of a BabelQueue conformance suite against this SDK's codec and Pulsar
binding, prints one line per block and case (PASS, FAIL with the reason, N/A for blocks
that concern other brokers or helpers this SDK does not ship) and a summary line. Exits 1
when any case failed.

Example:

	bq conformance --suite ../shared/babelqueue-conformance

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bq conformance: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *suite == "" {
		fmt.Fprintln(stderr, "bq conformance: --suite is required (for example --suite ../shared/babelqueue-conformance)")
		return exitUsage
	}
	s, err := conformance.Load(*suite, conformance.WithSkipUnknown(*skipUnknown))
	if err != nil {
		fmt.Fprintf(stderr, "bq conformance: %v\n", err)
		return exitFail
	}
	sum, err := s.Report(stdout)
	if err != nil {
		fmt.Fprintf(stderr, "bq conformance: %v\n", err)
		return exitFail
	}
	if !sum.OK() {
		return exitFail
	}
	return exitOK
}
