package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `desc: I1 cache:         32768 B, 64 B, 8-way associative
cmd: ./pulsar.test -test.run ^$ -test.bench X -test.benchtime 100x -test.cpu 1
events: Ir
fl=/src/a.go
fn=pkg.f
1 10
2 5
fn=pkg.g
7 3
fl=/src/b.go
fn=pkg.f
9 2
summary: 20
`

func TestParseCachegrindSumsByFunction(t *testing.T) {
	c, err := parseCachegrind(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if c.total != 20 {
		t.Errorf("total %v, want 20", c.total)
	}
	if c.byFunc["pkg.f"] != 17 || c.byFunc["pkg.g"] != 3 || len(c.byFunc) != 2 {
		t.Errorf("by function %v, want pkg.f 17 (both files), pkg.g 3", c.byFunc)
	}
}

func TestParseCachegrindRefusesWhatItCannotRead(t *testing.T) {
	for name, in := range map[string]string{
		"not cachegrind":     "hello\n",
		"cache simulation":   strings.Replace(sample, "events: Ir", "events: Ir I1mr", 1),
		"no summary":         strings.Replace(sample, "summary: 20\n", "", 1),
		"summary disagrees":  strings.Replace(sample, "summary: 20", "summary: 21", 1),
		"count before fn":    "events: Ir\n1 2\nsummary: 2\n",
		"bad count":          strings.Replace(sample, "7 3", "7 x", 1),
		"bad line number":    strings.Replace(sample, "7 3", "y 3", 1),
		"three fields":       strings.Replace(sample, "7 3", "7 3 4", 1),
		"nameless function":  strings.Replace(sample, "fn=pkg.g", "fn=", 1),
		"bad summary":        strings.Replace(sample, "summary: 20", "summary: -", 1),
		"counts overflowing": "events: Ir\nfn=f\n1 18446744073709551615\n2 1\nsummary: 0\n",
	} {
		if _, err := parseCachegrind(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestSlopeCancelsWhatRunsOnce(t *testing.T) {
	short := counts{total: 1000 + 100*7, byFunc: map[string]float64{"setup": 1000, "loop": 700, "once": 5}}
	long := counts{total: 1000 + 300*7 + 300*2, byFunc: map[string]float64{"setup": 1000, "loop": 2100, "extra": 600}}
	s := slope(short, long, 200)
	if s.total != (long.total-short.total)/200 {
		t.Errorf("total %v", s.total)
	}
	want := map[string]float64{"setup": 0, "loop": 7, "extra": 3, "once": -0.025}
	for fn, v := range want {
		if s.byFunc[fn] != v {
			t.Errorf("%s: %v a message, want %v", fn, s.byFunc[fn], v)
		}
	}
}

func TestReportListsTheDifferencesLargestFirst(t *testing.T) {
	first := counts{total: 110, byFunc: map[string]float64{"a": 50, "b": 40, "c": 20}}
	second := counts{total: 80, byFunc: map[string]float64{"a": 50, "b": 10, "d": 20}}
	var out bytes.Buffer
	report(&out, options{first: "X", second: "Y", counts: [2]int{1, 2}, min: 1, top: 2}, first, second)
	got := out.String()
	for _, want := range []string{"X: 110", "Y: 80", "difference: 30", "+30  b", "+20  c", "… 1 more"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "  a\n") {
		t.Errorf("a function without a difference is listed:\n%s", got)
	}
}

func TestFlags(t *testing.T) {
	if _, err := parseFlags(nil); err == nil {
		t.Error("no -bin: no error")
	}
	if _, err := parseFlags([]string{"-bin", "x", "-first", ""}); err == nil {
		t.Error("empty -first: no error")
	}
	for _, n := range []string{"1", "a,b", "0,5", "5,5", "9,3"} {
		if _, err := parseFlags([]string{"-bin", "x", "-n", n}); err == nil {
			t.Errorf("-n %s: no error", n)
		}
	}
	o, err := parseFlags([]string{"-bin", "x", "-n", "10, 30"})
	if err != nil || o.counts != [2]int{10, 30} {
		t.Errorf("-n 10,30: %v %v", o.counts, err)
	}
}

// FuzzParseCachegrind: any input is read or refused, never a panic, and what is read adds
// up to its summary (to float64's rounding).
func FuzzParseCachegrind(f *testing.F) {
	f.Add(sample)
	f.Add("events: Ir\nsummary: 0\n")
	f.Fuzz(func(t *testing.T, in string) {
		c, err := parseCachegrind(strings.NewReader(in))
		if err != nil {
			return
		}
		var sum float64
		for _, v := range c.byFunc {
			sum += v
		}
		if diff := sum - c.total; diff > c.total*1e-9 || -diff > c.total*1e-9 { // float64 sums of large counts round
			t.Fatalf("functions add up to %v, total %v", sum, c.total)
		}
	})
}

func TestRunSaysWhenValgrindIsMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := run(t.Context(), []string{"-bin", "pulsar.test"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "valgrind not found") {
		t.Fatalf("err = %v, want valgrind not found", err)
	}
}

func TestBenchPatternNamesOneBenchmark(t *testing.T) {
	for name, want := range map[string]string{
		"PipelineSuccess":          "^BenchmarkPipelineSuccess$",
		"PublishPath/recycled":     "^BenchmarkPublishPath$/^recycled$",
		"RunHandoff/concurrency=4": "^BenchmarkRunHandoff$/^concurrency=4$",
		"A.b(c)":                   `^BenchmarkA\.b\(c\)$`,
	} {
		if got := benchPattern(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
