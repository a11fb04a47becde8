package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// judgedFile is what the harness writes with BENCH_JSON (internal/benchcompare's
// judgedFile): the run's parameters and its judged rows.
type judgedFile struct {
	Header header `json:"header"`
	Rows   []row  `json:"rows"`
}

// header says where and how the rows were measured.
type header struct {
	Broker     string `json:"broker"`
	N          int    `json:"n"`
	Repeats    int    `json:"repeats"`
	Date       string `json:"date"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Platform   string `json:"platform"`
}

// row is one judged row: a figure (the median of the repeats, with the 95 % interval of
// the median) against a target, and the harness's verdict.
type row struct {
	Table      string  `json:"table"`
	Comparison string  `json:"comparison"`
	Variant    string  `json:"variant"`
	Metric     string  `json:"metric"`
	Median     float64 `json:"median"`
	Lo         float64 `json:"lo"`
	Hi         float64 `json:"hi"`
	HasCI      bool    `json:"has_ci"`
	Target     float64 `json:"target"`
	AtMost     bool    `json:"at_most"`
	HiMax      float64 `json:"hi_max"`
	Verdict    string  `json:"verdict"`
	TargetText string  `json:"target_text"` // the target in the harness's words, printed as it is
}

// maxRows bounds the rows of a file, so that a chart stays a chart.
const maxRows = 200

// errInvalid is wrapped by every error parseJudged returns for input it refuses.
var errInvalid = errors.New("benchchart: invalid judged rows")

// parseJudged decodes and checks the harness's JSON: a header with a positive N and
// repeat count, and 1 to maxRows rows, each named, with finite figures in order (lo ≤
// median ≤ hi), a positive target, a non-negative hi_max, one of the three verdicts, for
// an at-least row positive figures (it is drawn as target/figure), and figures within
// maxScale times their target. Members it does
// not know are ignored, so that a newer harness's file still draws.
func parseJudged(data []byte) (judgedFile, error) {
	var f judgedFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return judgedFile{}, fmt.Errorf("%w: %w", errInvalid, err)
	}
	if dec.More() {
		return judgedFile{}, fmt.Errorf("%w: more than one JSON value", errInvalid)
	}
	if f.Header.N <= 0 || f.Header.Repeats <= 0 {
		return judgedFile{}, fmt.Errorf("%w: header: n %d and repeats %d must be positive", errInvalid, f.Header.N, f.Header.Repeats)
	}
	if len(f.Rows) == 0 || len(f.Rows) > maxRows {
		return judgedFile{}, fmt.Errorf("%w: %d rows, want 1 to %d", errInvalid, len(f.Rows), maxRows)
	}
	for i, r := range f.Rows {
		if err := r.check(); err != nil {
			return judgedFile{}, fmt.Errorf("%w: row %d (%s / %s): %w", errInvalid, i+1, r.Comparison, r.Variant, err)
		}
	}
	return f, nil
}

// The verdicts of the harness's judge.
const (
	verdictMet       = "met"
	verdictNotMet    = "not met"
	verdictUndecided = "undecided"
)

// check reports what makes r undrawable, or nil.
func (r row) check() error {
	switch {
	case r.Comparison == "" || r.Variant == "":
		return errors.New("no comparison or variant")
	case r.TargetText == "":
		return errors.New("no target_text")
	case r.Verdict != verdictMet && r.Verdict != verdictNotMet && r.Verdict != verdictUndecided:
		return fmt.Errorf("verdict %q is none of %q, %q, %q", r.Verdict, verdictMet, verdictNotMet, verdictUndecided)
	case !finite(r.Median, r.Lo, r.Hi, r.Target, r.HiMax):
		return errors.New("a figure is not finite")
	case r.Target <= 0:
		return fmt.Errorf("target %g is not positive", r.Target)
	case r.HiMax < 0:
		return fmt.Errorf("hi_max %g is negative", r.HiMax)
	case r.Lo > r.Median || r.Median > r.Hi:
		return fmt.Errorf("the interval %g–%g does not hold the median %g", r.Lo, r.Hi, r.Median)
	case !r.AtMost && r.Lo <= 0:
		return fmt.Errorf("an at-least row's figures must be positive, the interval starts at %g", r.Lo)
	}
	b := r.normalized()
	for _, x := range []float64{b.x, b.lo, b.hi, b.hiMax} {
		if math.IsNaN(x) || math.Abs(x) > maxScale {
			return fmt.Errorf("figure/target %g is beyond ±%g: no chart shows it beside the others", x, float64(maxScale))
		}
	}
	return nil
}

// maxScale bounds a row's figure/target (and target/figure): beyond it, the row would
// make a panel's axis meaningless.
const maxScale = 1e6

// bar is a row as the chart draws it, on the scale where the target is 1 and less is
// better: figure/target for an at-most row, target/figure for an at-least row.
type bar struct {
	x, lo, hi float64
	hiMax     float64 // the interval's bound on that scale, 0 when the row has none
}

// normalized puts r on the chart's scale. For an at-least row the interval turns round:
// its low end is target/hi.
func (r row) normalized() bar {
	if r.AtMost {
		b := bar{x: r.Median / r.Target, lo: r.Lo / r.Target, hi: r.Hi / r.Target}
		if r.HiMax > 0 {
			b.hiMax = r.HiMax / r.Target
		}
		return b
	}
	b := bar{x: r.Target / r.Median, lo: r.Target / r.Hi, hi: r.Target / r.Lo}
	if r.HiMax > 0 {
		b.hiMax = r.Target / r.HiMax
	}
	return b
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}
