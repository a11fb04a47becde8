//go:build unix

package benchcompare_test

import (
	"fmt"
	"os"
	"runtime/metrics"
	"slices"
	"testing"
)

// collectorReading is what the runtime says of its garbage collector at one moment.
type collectorReading struct {
	cycles, allocated, goal, live uint64
}

// collectorMetrics are the runtime/metrics names that a collectorReading reads, in its order.
var collectorMetrics = []string{
	"/gc/cycles/total:gc-cycles",
	"/gc/heap/allocs:bytes",
	"/gc/heap/goal:bytes",
	"/gc/heap/live:bytes",
}

func readCollector() collectorReading {
	s := make([]metrics.Sample, len(collectorMetrics))
	for k, name := range collectorMetrics {
		s[k].Name = name
	}
	metrics.Read(s)
	return collectorReading{s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64()}
}

// TestConsumerCollector reports at what heap the garbage collector runs while the consume
// comparison's SDK Consumer and its reference loop take their windows (the package doc, "The
// collector in a consumer"). It runs with BENCH_COLLECTOR=1.
func TestConsumerCollector(t *testing.T) {
	if os.Getenv("BENCH_COLLECTOR") == "" {
		t.Skip("the collector's readings are taken with BENCH_COLLECTOR=1")
	}
	h := newHarness(t, *brokerURL)
	msg := rawMessage(t)
	variants := []variant{
		h.sdkConsumer("SDK Consumer", "collector-sdk", 1, msg),
		h.rawConsumer(classifyRef, "collector-reference", msg, true),
	}
	n, reps := *msgs, *repeats
	for _, v := range variants { // a warm-up window, not counted
		if err := v.prepare(n); err != nil {
			t.Fatal(err)
		}
		if err := v.run(n); err != nil {
			t.Fatal(err)
		}
	}
	type window struct{ cycles, bytes, goalMB, liveMB float64 }
	results := make([][]window, len(variants))
	for r := range reps {
		for k := range variants { // the order rotates from one repeat to the next
			vi := (k + r) % len(variants)
			v := variants[vi]
			if err := v.prepare(n); err != nil {
				t.Fatal(err)
			}
			before := readCollector()
			if err := v.run(n); err != nil {
				t.Fatal(err)
			}
			after := readCollector()
			results[vi] = append(results[vi], window{
				cycles: float64(after.cycles - before.cycles),
				bytes:  float64(after.allocated-before.allocated) / float64(n),
				goalMB: float64(after.goal) / 1e6,
				liveMB: float64(after.live) / 1e6,
			})
		}
	}
	where := "the embedded broker, in this process (the messages it holds are in the heap)"
	if *brokerURL != "" {
		where = "a broker outside this process (" + *brokerURL + "): the heap is the client's alone"
	}
	fmt.Printf("The collector during the consume windows, on %s; %d messages a window, %d windows a variant (medians, with the range)\n\n",
		where, n, reps)
	fmt.Println("| Variant | collector cycles a window | messages a cycle, all windows | bytes allocated a message | heap goal, MB | live heap, MB |")
	fmt.Println("| --- | --- | --- | --- | --- | --- |")
	for k, v := range variants {
		col := func(f func(window) float64, format string) string {
			xs := make([]float64, 0, len(results[k]))
			for _, w := range results[k] {
				xs = append(xs, f(w))
			}
			slices.Sort(xs)
			return fmt.Sprintf(format+" ("+format+"–"+format+")", median(xs), xs[0], xs[len(xs)-1])
		}
		cycles := 0.0
		for _, w := range results[k] {
			cycles += w.cycles
		}
		perCycle := "no cycle"
		if cycles > 0 {
			perCycle = fmt.Sprintf("%.0f", float64(n*reps)/cycles)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", v.name,
			col(func(w window) float64 { return w.cycles }, "%.0f"), perCycle,
			col(func(w window) float64 { return w.bytes }, "%.0f"),
			col(func(w window) float64 { return w.goalMB }, "%.1f"),
			col(func(w window) float64 { return w.liveMB }, "%.1f"))
	}
}
