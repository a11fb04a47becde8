package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/babelqueue/babelqueue-go-pulsar/conformance"
)

// runConformance implements `bq conformance`.
func runConformance(_ context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "bq conformance"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
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
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *suite == "" {
		return usageLine(stderr, name, "--suite is required (for example --suite ../shared/babelqueue-conformance)")
	}
	s, err := conformance.Load(*suite, conformance.WithSkipUnknown(*skipUnknown))
	if err != nil {
		return failLine(stderr, name, err)
	}
	sum, err := s.Report(stdout) //nolint:contextcheck // the suite runs to its end; Report takes no context
	if err != nil {
		return failLine(stderr, name, err)
	}
	if !sum.OK() {
		return exitFail
	}
	return exitOK
}
