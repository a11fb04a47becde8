package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// counts is what one run executed: instructions in all and by function (summed over the
// source files a function's code came from, inlined code included), or, after slope, the
// same a message.
type counts struct {
	total  float64
	byFunc map[string]float64
}

// parseCachegrind reads a cachegrind output file of the Ir event alone (--cache-sim=no):
// header lines ("desc:", "cmd:", "events:"), "fl=" and "fn=" lines naming the file and
// function of the count lines that follow them ("<line> <count>"), and the "summary:" line.
// The sum of the count lines must equal the summary.
func parseCachegrind(r io.Reader) (counts, error) {
	c := counts{byFunc: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var fn string
	var events, summary bool
	var sum, want uint64
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "desc:"), strings.HasPrefix(line, "cmd:"), strings.HasPrefix(line, "fl="):
		case strings.HasPrefix(line, "events:"):
			if f := strings.Fields(strings.TrimPrefix(line, "events:")); len(f) != 1 || f[0] != "Ir" {
				return c, fmt.Errorf("line %d: events %q: want Ir alone (run cachegrind with --cache-sim=no)", n, line)
			}
			events = true
		case strings.HasPrefix(line, "fn="):
			fn = strings.TrimPrefix(line, "fn=")
			if fn == "" {
				return c, fmt.Errorf("line %d: a function without a name", n)
			}
		case strings.HasPrefix(line, "summary:"):
			v, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "summary:")), 10, 64)
			if err != nil {
				return c, fmt.Errorf("line %d: summary %q: %w", n, line, err)
			}
			want, summary = v, true
		default:
			f := strings.Fields(line)
			if len(f) != 2 {
				return c, fmt.Errorf("line %d: %q: want a line number and a count", n, line)
			}
			if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
				return c, fmt.Errorf("line %d: line number %q: %w", n, f[0], err)
			}
			v, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return c, fmt.Errorf("line %d: count %q: %w", n, f[1], err)
			}
			if fn == "" {
				return c, fmt.Errorf("line %d: a count before any fn= line", n)
			}
			if sum+v < sum {
				return c, fmt.Errorf("line %d: the counts overflow", n)
			}
			sum += v
			c.byFunc[fn] += float64(v)
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("reading: %w", err)
	}
	switch {
	case !events:
		return c, errors.New("no events: line: not a cachegrind output file")
	case !summary:
		return c, errors.New("no summary: line: the file is cut short")
	case sum != want:
		return c, fmt.Errorf("the counts add up to %d, the summary says %d", sum, want)
	}
	c.total = float64(sum)
	return c, nil
}

// slope returns what the longer run b executed beyond the shorter run a, divided by the
// dn iterations it had more: the instructions an iteration, in all and by function.
func slope(a, b counts, dn int) counts {
	out := counts{total: (b.total - a.total) / float64(dn), byFunc: map[string]float64{}}
	for fn, v := range b.byFunc {
		out.byFunc[fn] = (v - a.byFunc[fn]) / float64(dn)
	}
	for fn, v := range a.byFunc {
		if _, ok := b.byFunc[fn]; !ok {
			out.byFunc[fn] = -v / float64(dn)
		}
	}
	return out
}
