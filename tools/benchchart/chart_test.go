package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readFixture returns testdata/judged.json, rows of every kind the harness writes: an
// at-most ratio with an upper-end bound, at-least ratios met and not met, an absolute row
// without an interval, and a tracing difference whose interval is partly negative.
func readFixture(tb testing.TB) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "judged.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// svgTexts returns the text of every <text> element of an SVG document, failing the test
// when the document is not well-formed XML or has no <svg> root.
func svgTexts(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var texts []string
	var in bool
	var root string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			in = tok.Name.Local == "text"
			if in {
				texts = append(texts, "")
			}
		case xml.CharData:
			if in {
				texts[len(texts)-1] += string(tok)
			}
		case xml.EndElement:
			in = false
		}
	}
	if root != "svg" {
		t.Fatalf("the document's root is <%s>, want <svg>", root)
	}
	return texts
}

// The chart is an SVG document with the title (the broker and the run's parameters) and
// every row's label: its comparison, its variant, and its figures with the target and
// the verdict.
func TestRender(t *testing.T) {
	f, err := parseJudged(readFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := render(f)
	if err != nil {
		t.Fatal(err)
	}
	texts := svgTexts(t, doc)
	want := strings.Split(title(f.Header), "\n")
	for _, r := range f.Rows {
		want = append(want, strings.Split(label(r), "\n")...)
	}
	want = append(want, panelTitles["reference"], panelTitles["absolute"], panelTitles["tracing"])
	for _, w := range want {
		found := false
		for _, s := range texts {
			if s == w {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("the chart has no text %q", w)
		}
	}
	for _, w := range []string{
		"the embedded broker, in this process: the CPU figures include its work",
		"300 messages a window × 9 repeats, GOMAXPROCS=2, linux/amd64, 2026-12-04T01:00:00Z",
		"CPU/msg SDK/reference 1.01 [0.98–1.05], target ≤ 1.03× (interval's upper end ≤ 1.08): UNDECIDED",
		"throughput SDK/reference 1.16 [1.12–1.21], target ≥ 1.10×: MET",
		"throughput SDK/reference 0.91 [0.89–0.94], target ≥ 0.97×: NOT MET",
		"CPU µs/msg (allocs/msg 5.0, median) 1.28 no interval (fewer than 6 repeats), target ≤ 2.00 µs CPU and ≤ 6 allocs a message: UNDECIDED",
	} {
		if !strings.Contains(strings.Join(want, "\n"), w) {
			t.Errorf("the expected texts have no %q: the labels changed", w)
		}
	}
}

// Every row is drawn on the scale where the target is 1 and less is better; an at-least
// row's interval turns round.
func TestNormalized(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    row
		want bar
	}{
		{"at most", row{Median: 1.5, Lo: 1, Hi: 2, Target: 2, AtMost: true, HiMax: 3}, bar{x: 0.75, lo: 0.5, hi: 1, hiMax: 1.5}},
		{"at most, negative", row{Median: 1, Lo: -2, Hi: 4, Target: 2, AtMost: true}, bar{x: 0.5, lo: -1, hi: 2}},
		{"at least", row{Median: 2, Lo: 1, Hi: 4, Target: 2}, bar{x: 1, lo: 0.5, hi: 2}},
	} {
		if got := tc.r.normalized(); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// parseJudged refuses what cannot be drawn sensibly, with errInvalid.
func TestParseJudgedRefuses(t *testing.T) {
	good := string(readFixture(t))
	first := `"median": 1.01, "lo": 0.98, "hi": 1.05`
	for name, doc := range map[string]string{
		"not JSON":               `{"header":`,
		"two values":             good + good,
		"no rows":                `{"header": {"n": 1, "repeats": 1}, "rows": []}`,
		"no repeats":             strings.Replace(good, `"repeats": 9`, `"repeats": 0`, 1),
		"unknown verdict":        strings.Replace(good, `"verdict": "met"`, `"verdict": "yes"`, 1),
		"median outside":         strings.Replace(good, first, `"median": 1.2, "lo": 0.98, "hi": 1.05`, 1),
		"zero target":            strings.Replace(good, `"target": 1.03`, `"target": 0`, 1),
		"negative hi_max":        strings.Replace(good, `"hi_max": 1.08`, `"hi_max": -1`, 1),
		"at least, not positive": strings.Replace(good, `"median": 1.16, "lo": 1.12`, `"median": 1.16, "lo": 0`, 1),
		"beyond the scale":       strings.Replace(good, first, `"median": 1.01, "lo": 0.98, "hi": 1e300`, 1),
		"no comparison":          strings.Replace(good, `"comparison": "consume, no-op handler"`, `"comparison": ""`, 1),
		"no target text":         strings.Replace(good, `"target_text": "≥ 1.10×"`, `"target_text": ""`, 1),
	} {
		if doc == good {
			t.Fatalf("%s: the fixture changed, the case no longer edits it", name)
		}
		if _, err := parseJudged([]byte(doc)); !errors.Is(err, errInvalid) {
			t.Errorf("%s: err = %v, want errInvalid", name, err)
		}
	}
	if _, err := parseJudged([]byte(strings.Replace(good, `"header": {`, `"header": {"commit": "abc", `, 1))); err != nil {
		t.Errorf("a member the chart does not know: %v, want it ignored", err)
	}
}

// The command reads -in and writes -out; without both it refuses.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "chart.svg")
	if err := run([]string{"-in", filepath.Join("testdata", "judged.json"), "-out", out}, io.Discard); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(svgTexts(t, doc)) == 0 {
		t.Error("the chart has no text")
	}
	if err := run([]string{"-in", filepath.Join("testdata", "judged.json")}, io.Discard); err == nil {
		t.Error("no -out: no error")
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-in", bad, "-out", out}, io.Discard); !errors.Is(err, errInvalid) {
		t.Errorf("an empty document: err = %v, want errInvalid", err)
	}
}

// parseJudged reads outside input: whatever the bytes, it returns an error or rows that
// draw, and neither it nor the drawing panics.
func FuzzParseJudged(f *testing.F) {
	f.Add(readFixture(f))
	f.Add([]byte(`{"header": {"n": 1, "repeats": 1}, "rows": [{"comparison": "c", "variant": "v", "median": 1, "lo": 1, "hi": 1, "target": 1, "verdict": "met"}]}`))
	f.Add([]byte(`{"header": {"n": 1, "repeats": 1}, "rows": [{"comparison": "c", "variant": "v", "median": -1e-300, "lo": -1e-300, "hi": 0, "target": 1e-300, "at_most": true, "verdict": "met"}]}`))
	f.Add([]byte(`{"rows": null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		jf, err := parseJudged(data)
		if err != nil {
			if !errors.Is(err, errInvalid) {
				t.Fatalf("error %v does not wrap errInvalid", err)
			}
			return
		}
		for _, r := range jf.Rows {
			b := r.normalized()
			if b.lo > b.x || b.x > b.hi || math.IsInf(b.lo, 0) || math.IsInf(b.hi, 0) {
				t.Fatalf("row %+v drawn as %+v: not finite, or the median outside its interval", r, b)
			}
		}
		if _, err := render(jf); err != nil {
			t.Fatal(err)
		}
	})
}
