// Package benchcompare holds the SDK-against-raw-client benchmark harness (`make
// bench-compare`); the harness itself is a test of this package, so that it can use the
// embedded broker of package pulsartest.
//
// In one process, against one embedded broker, it runs each variant of a comparison (the raw
// pulsar-client-go loop and the SDK doing the same work with the same producer settings) in
// windows of the same number of messages, in an order that rotates from one repeat to the
// next, so that the load of a shared machine falls on every variant alike. For each window
// it measures the wall-clock throughput, the process CPU time (user + system, from
// getrusage) and the number of heap allocations (runtime.MemStats.Mallocs) per message.
//
// Its first table judges the targets of issue 27, each stated against a reference that does
// the work the contract requires: the SDK Consumer against a raw loop that also classifies
// every body, PublishAsync against a raw producer that builds each envelope by hand, Publish
// against a raw Send of one prepared message, and the runtime's pipeline against absolute
// figures. A row is the ratio of the SDK variant to its reference in the same repeat, as the
// median, a 95 % confidence interval of the median and the range, with a verdict read from
// the interval: met, not met, or undecided while the interval contains the target (judge, one
// rule for every judged row). A ratio is meaningful on a loaded machine where an absolute
// time is not; the interval says how far the median can be trusted. It is distribution-free
// (the binomial order statistics of the sorted ratios), so it needs at least 6 repeats. The
// consume comparisons add a third variant, judged against the same reference and target:
// the contract floor (floorConsumer), a raw loop that also does what the contract requires
// of every message and the reference leaves out (the schema gate, the attempts reconciled
// with the redelivery count, the routing URN looked up and its handler called, a receive
// that a cancelled context stops) through the SDK's exported functions, and under
// WithConcurrency(4) hands each message to one of four goroutines. No consumer that keeps
// the contract can cost less, so its row says whether the target is within reach on this
// machine at all (met) or out of it (not met). The sync publish comparisons have a floor
// too, judged against the sync target: a raw Send of a fresh envelope a message (made with
// envelope.Make, Encode and ProjectProperties), as the contract requires of every publish
// where the raw side sends one prepared message. The
// tables after it, every SDK variant against the raw client's floor and against the
// reference variants on both metrics, are information; the last judges what bqotel adds.
// With BENCH_JSON (flag -compare.json) the harness also writes the judged rows, with the
// run's broker and parameters, as JSON: tools/benchchart draws them as a chart.
//
// With BENCH_PULSAR_URL (flag -compare.url) the comparisons run against that broker instead
// of an embedded one: a real cluster, or `bq broker -trim-interval 10s` started in another
// process. The process CPU is then the client's alone, where the embedded broker's work is
// otherwise part of every variant's figure, so the ratios are those a service sees in its
// own process. Such a broker cannot pause a topic's dispatch while the harness fills it, so
// there the consumers take nothing during a fill (the raw loop does not call Receive; the SDK
// Consumer's Run starts inside the window and is stopped after it) and only the client's
// prefetch, its receiver queue of 1,000 messages on every side, arrives before the window.
// The topics are named compare-<run>-… in public/default, apart from an earlier run's, and
// left behind with what was sent to them, which the broker keeps until their ledgers roll
// over: tens of gigabytes a run, so a run wants a broker of its own (tools/pulsar/bench.conf).
//
// Every run's first lines name the machine (GOMAXPROCS, the processor's model name and the
// load average), the broker and, with BENCH_BUILT_FROM (flag -compare.built-from), what was
// measured: make bench-compare sets it to the pulsar-client-go version that go.mod selects
// and the tree's commit, which a test binary cannot read for itself, so that a table copied
// into the performance record says which client, which code and which machine it came from.
//
// With BENCH_PROFILE (flag -compare.profile) set to a directory, every measured window (not
// the warm-up) writes a CPU profile of the whole process while its messages run, to
// window-<comparison>-<variant>-<repeat>.pprof there (each name in lower case, every run of
// other characters than letters and digits one '-'). The profiler's own cost, 100 samples a
// second, falls on every window alike. Merged over the repeats, two variants' profiles say
// where one spends more than the other, over the same interleaved rounds, for instance the
// SDK Consumer's against the consume comparison's contract floor:
//
//	go tool pprof -proto DIR/window-consume-no-op-handler-contract-floor-[0-9]* > floor.pb.gz
//	go tool pprof -proto DIR/window-consume-no-op-handler-sdk-consumer-[0-9]* > sdk.pb.gz
//	go tool pprof -top -cum -diff_base=floor.pb.gz sdk.pb.gz
//
// With BENCH_FLOOR_EXTRA (flag -compare.floor-extra) set to a duration, the consume
// comparison at concurrency 1 also runs the contract floor with a handler that spends about
// that much CPU a message in a loop that touches no memory (floorConsumerSpending; the loop is
// calibrated once, so its real cost is what the profiles say). That variant costs more a
// message than the floor by a known amount and differs from it in nothing else. Beside the
// SDK, and profiled, it tells whether the code that every side runs (the client's connection
// reader above all) slows beside any consumer that spends more a message, or beside the SDK
// alone: its ratios to the SDK are in the table of the reference variants. For instance, with
// a cost like that of the SDK's own loop:
//
//	make bench-compare BENCH_ONLY=consume BENCH_N=100000 BENCH_REPEATS=25 BENCH_CHART= \
//		BENCH_FLOOR_EXTRA=150ns BENCH_PROFILE=DIR
//
// # Latency under load
//
// The latency comparison (BENCH_ONLY=latency) measures how long a message takes from the
// publish to the handler at fixed rates. It first measures the capacity of every side in the
// same run: after a warm-up burst of each, ten closed-loop bursts of BENCH_N messages of each,
// interleaved in rotating order. The raw client's end-to-end maximum is the median of the
// raw side's bursts (a raw producer's SendAsync to a raw consumer's Receive + Ack). Besides
// the three sides below, two mixed ones pair the SDK's producer with the floor's consumer
// and the floor's producer with the SDK's consumer. The capacity table gives each side's
// rate and CPU a message, and its ratios to raw's and to the floor's burst by burst, with the
// interval of their median, so it can say which half of the SDK costs more than the floor,
// or that the bursts cannot tell.
//
// With BENCH_PROFILE set to a directory, every capacity burst also writes a CPU profile of the
// whole process there, capacity-<side>-<round>.pprof (the sides are latency-raw,
// latency-sdk, latency-floor, latency-sdk-producer and latency-sdk-consumer). Merged over
// the rounds, two sides' profiles say where one spends more than the other, for instance the
// SDK's producer against the floor's:
//
//	go tool pprof -proto DIR/capacity-latency-floor-* > floor.pb.gz
//	go tool pprof -proto DIR/capacity-latency-sdk-producer-* > sdk-producer.pb.gz
//	go tool pprof -top -cum -diff_base=floor.pb.gz sdk-producer.pb.gz
//
// At 25, 50 and 75 % of the raw maximum it runs, after a warm-up window of each,
// BENCH_REPEATS windows of each side in rotating order: the raw producer's SendAsync to a
// loop of Receive + Ack, the Publisher's PublishAsync to a Consumer whose handler does
// nothing, and the contract floor (a raw producer sending an envelope made per message with
// envelope.Make, to the consume floor's loop), whose rows are judged against the same
// targets to say whether each is within reach of anything that keeps the contract. A window
// has min(BENCH_N, rate × 5 s) messages. Both sides send with batching disabled, so that no
// batch timer, the same on both, makes up most of the latency.
//
// The sender is open loop: message i of a window is due at start + i/rate and carries that
// time in its bench-sent-ns property, and a send that is late goes out at once without
// moving the later ones. A message's latency runs from when it was due to the moment
// Receive returned it or the handler was called with it, so a stall of the sender, the
// client or the broker counts for every message it held back, as it would for a service
// under that load (no coordinated omission). The latencies of a window go into an
// HdrHistogram (github.com/HdrHistogram/hdrhistogram-go); the report gives each side's p50,
// p99, p99.9 and maximum, and the SDK's percentiles over the raw ones repeat by repeat,
// judged like the other targets: p50 and p99 at most 1.10×, p99.9 at most 1.25×.
//
// # The collector in a consumer
//
// TestConsumerCollector, with BENCH_COLLECTOR=1, runs BENCH_REPEATS windows of BENCH_N
// messages of the consume comparison's SDK Consumer and of its reference loop, in rotating
// order, and reads runtime/metrics around each: the garbage collector's cycles a window and
// the messages a cycle, the bytes allocated a message, and the heap goal and live heap at the
// window's end. It says at what heap a consumer's collector runs, which the codec's
// benchmarks, in a test binary whose live heap is nearly empty, cannot. With
// BENCH_PULSAR_URL the heap is the client's alone; on the embedded broker it also holds
// the messages the broker keeps, so the collector runs far less often than in a client:
//
//	BENCH_COLLECTOR=1 BENCH_N=50000 BENCH_REPEATS=6 BENCH_PULSAR_URL=pulsar://… \
//		go test -count=1 -run='^TestConsumerCollector$' -v ./internal/benchcompare
package benchcompare
