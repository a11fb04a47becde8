//go:build unix

package benchcompare_test

import (
	"fmt"
	"testing"
)

// judgedRow is one figure with a target: a row of a judged table, and a bar of the chart.
// Every table that states a verdict (the restated comparisons, latency under load) builds
// its rows with judge, so that the verdict rule lives in one place and the chart can draw
// any of them.
type judgedRow struct {
	Table      string  `json:"table"`      // the table the row belongs to, e.g. "reference", "latency"
	Comparison string  `json:"comparison"` // the comparison, as in the tables
	Variant    string  `json:"variant"`    // the variant judged, with its reference when there is one
	Metric     string  `json:"metric"`     // what Median is, e.g. "CPU/msg SDK/reference"
	Median     float64 `json:"median"`
	Lo         float64 `json:"lo"` // the 95 % interval of the median (equal to Median when HasCI is false)
	Hi         float64 `json:"hi"`
	HasCI      bool    `json:"has_ci"` // false below 6 repeats, where no interval exists
	Target     float64 `json:"target"`
	AtMost     bool    `json:"at_most"` // true: the figure must be at most Target; false: at least
	// HiMax, when above 0, also bounds the interval's upper end (the consume row's "and
	// the interval's upper end ≤ 1.08").
	HiMax   float64 `json:"hi_max,omitempty"`
	Verdict string  `json:"verdict"` // verdictMet, verdictNotMet or verdictUndecided
	// TargetText is the target as the row's table states it (targetText, or the µs and
	// absolute targets' own words): the chart prints it as it is.
	TargetText string `json:"target_text"`
}

// The three verdicts.
const (
	verdictMet       = "met"
	verdictNotMet    = "not met"
	verdictUndecided = "undecided"
)

// judge builds the row of the ratios (or figures) xs, one a repeat, against target. The
// verdict reads from the 95 % interval of the median: met when the whole interval is on
// the target's good side, not met when the whole interval is on its bad side, undecided
// when the interval contains the target (more repeats can decide it). With HiMax set, an
// interval whose upper end passes HiMax is not met whatever the median. Below 6 repeats
// there is no interval, and the verdict is undecided.
func judge(xs []float64, target float64, atMost bool, hiMax float64) judgedRow {
	r := judgedRow{Median: median(xs), Target: target, AtMost: atMost, HiMax: hiMax}
	r.Lo, r.Hi, r.HasCI = medianCI(xs)
	if !r.HasCI {
		r.Lo, r.Hi = r.Median, r.Median
	}
	good := func(x float64) bool { // x on the target's good side (the target itself is good)
		if atMost {
			return x <= target
		}
		return x >= target
	}
	switch {
	case !r.HasCI:
		r.Verdict = verdictUndecided
	case hiMax > 0 && r.Hi > hiMax:
		r.Verdict = verdictNotMet
	case good(r.Lo) && good(r.Hi):
		r.Verdict = verdictMet
	case !good(r.Lo) && !good(r.Hi):
		r.Verdict = verdictNotMet
	default:
		r.Verdict = verdictUndecided
	}
	return r
}

// op is the comparison of a row's target: "≤" for an at-most row, "≥" for an at-least one.
func (r judgedRow) op() string {
	if r.AtMost {
		return "≤"
	}
	return "≥"
}

// targetText is the Target cell of a judged row, e.g. "≤ 1.03× (interval's upper end ≤ 1.08)".
func (r judgedRow) targetText() string {
	s := fmt.Sprintf("%s %.2f×", r.op(), r.Target)
	if r.HiMax > 0 {
		s += fmt.Sprintf(" (interval's upper end ≤ %.2f)", r.HiMax)
	}
	return s
}

// The verdict reads from the interval: a run decides a row only when the whole interval is
// on one side of the target.
func TestJudge(t *testing.T) {
	seq := func(lo float64, n int) []float64 { // n ratios lo, lo+0.01, …
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = lo + float64(i)/100
		}
		return xs
	}
	// 9 repeats: the interval is x(2)–x(8), here lo+0.01 – lo+0.07, the median lo+0.04.
	for _, tc := range []struct {
		name   string
		xs     []float64
		target float64
		atMost bool
		hiMax  float64
		want   string
	}{
		{"at most, interval below", seq(0.90, 9), 1.00, true, 0, verdictMet},
		{"at most, interval above", seq(1.10, 9), 1.00, true, 0, verdictNotMet},
		{"at most, interval spans", seq(0.98, 9), 1.00, true, 0, verdictUndecided},
		{"at most, target at the upper end", seq(0.93, 9), 1.00, true, 0, verdictMet},
		{"at least, interval above", seq(1.10, 9), 1.00, false, 0, verdictMet},
		{"at least, interval below", seq(0.80, 9), 1.00, false, 0, verdictNotMet},
		{"at least, interval spans", seq(0.98, 9), 1.00, false, 0, verdictUndecided},
		{"upper end bound passed", seq(0.98, 9), 1.03, true, 1.04, verdictNotMet},
		{"upper end bound kept", seq(0.90, 9), 1.03, true, 1.08, verdictMet},
		{"too few repeats", seq(0.50, 5), 1.00, true, 0, verdictUndecided},
	} {
		got := judge(tc.xs, tc.target, tc.atMost, tc.hiMax)
		if got.Verdict != tc.want {
			t.Errorf("%s: verdict %q (median %.2f, interval %.2f–%.2f), want %q",
				tc.name, got.Verdict, got.Median, got.Lo, got.Hi, tc.want)
		}
	}
	r := judge(seq(1.0, 5), 1.03, true, 1.08)
	if r.HasCI || r.Lo != r.Median || r.Hi != r.Median {
		t.Errorf("5 repeats: %+v, want no interval and Lo = Hi = Median", r)
	}
	if got := r.targetText(); got != "≤ 1.03× (interval's upper end ≤ 1.08)" {
		t.Errorf("targetText = %q", got)
	}
	if got := judge(seq(1, 9), 1.10, false, 0).targetText(); got != "≥ 1.10×" {
		t.Errorf("targetText = %q", got)
	}
}
