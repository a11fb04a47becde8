package main

import (
	"bufio"
	"encoding/json"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// failure is one failed test (or a package that failed outside its tests) in one run.
type failure struct {
	Package string // import path; "" when the output did not say
	Test    string // "" for a package-level failure: build error, panic in TestMain, timeout
	Line    string // the first line that says what went wrong
}

// key names the failure across runs.
func (f failure) key() string { return f.Package + "\x00" + f.Test }

// event is the subset of a test2json event (go test -json, gotestsum --jsonfile) read here.
type event struct {
	Action     string `json:"Action"`
	Package    string `json:"Package"`
	Test       string `json:"Test"`
	Output     string `json:"Output"`
	ImportPath string `json:"ImportPath"` // build-output and build-fail events (Go 1.24+)
}

var (
	fileLine   = regexp.MustCompile(`^\s*([\w./-]+\.go:\d+): ?(.*)$`)
	testifyErr = regexp.MustCompile(`^\s*Error:\s+(.*\S)`)
	failHeader = regexp.MustCompile(`^(\s*)--- FAIL: (\S+) \(`)
	pkgFail    = regexp.MustCompile(`^FAIL\s+(\S+)(\s+\[[^\]]+\]|\s+[\d.]+s)?\s*$`)
	pkgOK      = regexp.MustCompile(`^(ok|\?)\s+(\S+)\s`)
	buildHead  = regexp.MustCompile(`^# (\S+)`) // "# example.com/p [example.com/p.test]" starts a build error
)

// maxLine bounds a reported line, so that one huge assertion does not push the others out
// of a log's last lines.
const maxLine = 200

// firstErrorLine picks the line of a test's output that says what went wrong: the first
// testify assertion ("file.go:N:" followed by its "Error:" line), else the last
// "file.go:N: message" (a test stops at its Fatal; a t.Log before it is context), else a
// panic or timeout line, else the first line of text.
func firstErrorLine(lines []string) string {
	var last, panicked, fallback string
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		if m := fileLine.FindStringSubmatch(l); m != nil {
			msg := strings.TrimSpace(m[2])
			if msg == "" {
				if e := testifyError(lines[i+1:]); e != "" {
					return clip(m[1] + ": " + e)
				}
				continue
			}
			last = m[1] + ": " + msg
			continue
		}
		if panicked == "" && (strings.HasPrefix(t, "panic: ") || strings.Contains(t, "test timed out")) {
			panicked = t
		}
		if fallback == "" && t != "FAIL" && !strings.HasPrefix(t, "exit status") {
			fallback = t
		}
	}
	switch {
	case last != "":
		return clip(last)
	case panicked != "":
		return clip(panicked)
	}
	return clip(fallback)
}

// testifyError returns the message of the "Error:" line of the testify block that lines
// start with, or "" when they do not start one.
func testifyError(lines []string) string {
	for _, l := range lines {
		if e := testifyErr.FindStringSubmatch(l); e != nil {
			return e[1]
		}
		if !strings.Contains(l, "\t") || fileLine.MatchString(l) {
			return ""
		}
	}
	return ""
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxLine {
		return s[:maxLine-3] + "..."
	}
	return s
}

// parse reads one go test run (see parseRun), returning its failures.
func parse(r io.Reader) ([]failure, error) {
	p, err := parseRun(r)
	if err != nil {
		return nil, err
	}
	return p.result(), nil
}

// parseRun reads one go test run, as test2json events or as go test's plain output (a file may
// mix both, for example a step's log). Its result is the run's failures, leaves only: a test
// whose subtest failed is not listed again, nor a package whose test failed. Verdicts of
// passing and skipped tests are kept from JSON events only (plain output names failures).
func parseRun(r io.Reader) (*parser, error) {
	p := newParser()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "{") {
			var e event
			if err := json.Unmarshal([]byte(line), &e); err == nil && e.Action != "" {
				p.event(e)
				continue
			}
		}
		p.text(line)
	}
	if err := sc.Err(); err != nil {
		return nil, err //nolint:wrapcheck // the caller names the file
	}
	return p, nil
}

type parser struct {
	// JSON events: output per package and test, the tests that failed, and every test's
	// last verdict (pass, fail or skip), for tallying a target's subtests.
	out      map[string][]string // key of (package, test) → output lines
	failed   []failure
	verdicts map[string]verdict
	order    []string

	// Plain text: the failing tests of the package whose output is being read, attributed
	// when its "FAIL <package>" line arrives.
	pending   []*failure
	current   *failure // the --- FAIL block whose lines are being read
	curLines  []string
	pkgLines  []string // lines since the last package verdict, for a package-level failure
	buildPkgs map[string][]string
	buildPkg  string

	// The race detector's reports: a test it fails says only "race detected during
	// execution of test", and the report itself (printed by whichever test's goroutine
	// raced, maybe another one) is what says why.
	races  [][]string
	inRace bool
}

// raceStart and raceEnd delimit a report of the race detector.
const (
	raceStart = "WARNING: DATA RACE"
	raceEnd   = "=================="
)

// maxRaceLines bounds the lines kept of one race report.
const maxRaceLines = 80

// race keeps the lines of the race detector's reports.
func (p *parser) race(line string) {
	switch {
	case strings.TrimSpace(line) == raceStart:
		p.races = append(p.races, []string{raceStart})
		p.inRace = true
	case !p.inRace:
	case strings.TrimSpace(line) == raceEnd:
		p.inRace = false
	default:
		if r := &p.races[len(p.races)-1]; len(*r) < maxRaceLines {
			*r = append(*r, line)
		}
	}
}

func newParser() *parser {
	return &parser{out: map[string][]string{}, buildPkgs: map[string][]string{}, verdicts: map[string]verdict{}}
}

func (p *parser) event(e event) {
	switch e.Action {
	case "build-output":
		e.ImportPath = trimVariant(e.ImportPath)
		p.buildPkgs[e.ImportPath] = append(p.buildPkgs[e.ImportPath], strings.TrimRight(e.Output, "\n"))
	case "build-fail":
		e.ImportPath = trimVariant(e.ImportPath)
		p.failed = append(p.failed, failure{Package: e.ImportPath, Line: firstBuildLine(p.buildPkgs[e.ImportPath])})
	case "output":
		k := e.Package + "\x00" + e.Test
		p.out[k] = append(p.out[k], strings.TrimRight(e.Output, "\n"))
		p.race(strings.TrimRight(e.Output, "\n"))
	case "fail":
		f := failure{Package: e.Package, Test: e.Test}
		f.Line = firstErrorLine(p.out[f.key()])
		p.failed = append(p.failed, f)
		p.verdict(f, e.Action)
	case "pass", "skip":
		p.verdict(failure{Package: e.Package, Test: e.Test, Line: firstErrorLine(p.out[e.Package+"\x00"+e.Test])}, e.Action)
	}
}

// verdict is one test's outcome in a JSON run.
type verdict struct {
	failure
	Action string // pass, fail or skip
}

func (p *parser) verdict(f failure, action string) {
	if f.Test == "" {
		return
	}
	if _, ok := p.verdicts[f.key()]; !ok {
		p.order = append(p.order, f.key())
	}
	p.verdicts[f.key()] = verdict{failure: f, Action: action}
}

// leafVerdicts returns the outcomes of the tests that have a path element named element
// ("real" in TestX/real/case) and no subtest of their own, in the order they ended.
func (p *parser) leafVerdicts(element string) []verdict {
	parents := map[string]bool{}
	for _, k := range p.order {
		v := p.verdicts[k]
		if i := strings.LastIndex(v.Test, "/"); i >= 0 {
			parents[v.Package+"\x00"+v.Test[:i]] = true
		}
	}
	var out []verdict
	for _, k := range p.order {
		v := p.verdicts[k]
		if !parents[k] && slices.Contains(strings.Split(v.Test, "/"), element) {
			out = append(out, v)
		}
	}
	return out
}

// trimVariant drops the " [p.test]" that names the test variant of a package being built.
func trimVariant(importPath string) string {
	if i := strings.Index(importPath, " ["); i >= 0 {
		return importPath[:i]
	}
	return importPath
}

func firstBuildLine(lines []string) string {
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "# ") {
			return clip(t)
		}
	}
	return "build failed"
}

func (p *parser) text(line string) {
	p.race(line)
	if m := failHeader.FindStringSubmatch(line); m != nil {
		p.closeBlock()
		p.current = &failure{Test: m[2]}
		return
	}
	if m := pkgFail.FindStringSubmatch(line); m != nil {
		p.closeBlock()
		p.pkgVerdict(m[1], true, strings.Contains(m[2], "build failed") || strings.Contains(m[2], "setup failed"))
		return
	}
	if m := pkgOK.FindStringSubmatch(line); m != nil {
		p.closeBlock()
		p.pkgVerdict(m[2], false, false)
		return
	}
	if m := buildHead.FindStringSubmatch(line); m != nil {
		p.closeBlock()
		p.buildPkg = m[1]
		return
	}
	if p.buildPkg != "" {
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "FAIL") {
			p.buildPkgs[p.buildPkg] = append(p.buildPkgs[p.buildPkg], line)
			return
		}
		p.buildPkg = ""
	}
	if p.current != nil {
		// A test's block is its indented lines; an unindented line ends it (a panic's
		// trace, the package's FAIL line). A panic that ends it is the test's own.
		if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "panic: ") {
			p.curLines = append(p.curLines, line)
			if !strings.HasPrefix(line, "panic: ") {
				return
			}
		}
		p.closeBlock()
	}
	p.pkgLines = append(p.pkgLines, line)
}

// closeBlock ends the --- FAIL block being read, and a build error's output too: go test
// prints a package's build error whenever its compile ends, so the next line may already be
// another package's test block (a flake of TestRealGoTestOutput/plain in a flake hunt: the
// block's lines were taken for the build error's, and its failures lost their reasons).
func (p *parser) closeBlock() {
	p.buildPkg = ""
	if p.current == nil {
		return
	}
	p.current.Line = firstErrorLine(p.curLines)
	p.pending = append(p.pending, p.current)
	p.current, p.curLines = nil, nil
}

// pkgVerdict attributes the pending failures to pkg, or records a package-level failure
// when the package failed without a failing test.
func (p *parser) pkgVerdict(pkg string, failed, build bool) {
	switch {
	case build:
		p.failed = append(p.failed, failure{Package: pkg, Line: firstBuildLine(p.buildPkgs[pkg])})
	case failed && len(p.pending) == 0:
		p.failed = append(p.failed, failure{Package: pkg, Line: firstErrorLine(p.pkgLines)})
	}
	for _, f := range p.pending {
		f.Package = pkg
		p.failed = append(p.failed, *f)
	}
	p.pending, p.pkgLines = nil, nil
}

func (p *parser) result() []failure {
	p.closeBlock()
	// Failures whose package line never came (a truncated log) keep an empty package.
	for _, f := range p.pending {
		p.failed = append(p.failed, *f)
	}
	p.pending = nil
	parents := map[string]bool{}
	pkgsWithTests := map[string]bool{}
	for _, f := range p.failed {
		if f.Test != "" {
			pkgsWithTests[f.Package] = true
		}
		for name := f.Test; strings.Contains(name, "/"); {
			name = name[:strings.LastIndex(name, "/")]
			parents[f.Package+"\x00"+name] = true
		}
	}
	seen := map[string]bool{}
	var leaves []failure
	for _, f := range p.failed {
		if seen[f.key()] || parents[f.key()] || (f.Test == "" && pkgsWithTests[f.Package]) {
			continue
		}
		seen[f.key()] = true
		leaves = append(leaves, f)
	}
	sort.SliceStable(leaves, func(i, j int) bool {
		if leaves[i].Package != leaves[j].Package {
			return leaves[i].Package < leaves[j].Package
		}
		return leaves[i].Test < leaves[j].Test
	})
	return leaves
}
