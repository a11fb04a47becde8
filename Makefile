# Targets of babelqueue-go-pulsar. Tools are pinned in tools/go.mod and run with
# `go tool -modfile=tools/go.mod`, so they never enter the module's own go.mod. The
# repository is a Go workspace (go.work: the main module and examples/, a module of its own
# so that its exporters stay out of the main go.mod); -modfile cannot be used in workspace
# mode, so the tools and the go:generate lines run with GOWORK=off, once per module.
GO        ?= go
TOOL      := GOWORK=off $(GO) tool -modfile=tools/go.mod
MODULES   := . examples tools
SUITE     ?= ../shared/babelqueue-conformance
FUZZTIME  ?= 30s

.PHONY: all check test race flake lint vet bench bench-compare bench-instructions fuzz cover generate generate-check tidy-check conformance fidelity fidelity-calibrate pulsar ci

all: check

## check: what CI requires on every change
check: vet lint tidy-check generate-check race conformance

## test: the README's test command
test:
	$(GO) test ./...

## race: the tests under the race detector
race:
	$(GO) test -race ./...

## flake: the race suite N times (-count=1, each run shuffled with its own seed), then every
## test that failed at least once, how often, why and the seeds to replay it (tools/flake/run.sh;
## PKGS narrows the packages, RACE=0 drops the race detector)
N ?= 10
flake:
	N="$(N)" PKGS="$(PKGS)" RACE="$(RACE)" bash tools/flake/run.sh

vet:
	$(GO) vet ./... ./examples/...
	cd tools && GOWORK=off $(GO) vet ./...

lint:
	$(TOOL) golangci-lint run ./...
	cd examples && GOWORK=off $(GO) tool -modfile=../tools/go.mod golangci-lint run ./...
	cd tools && GOWORK=off $(GO) tool golangci-lint run ./...

## bench: codec and publish/consume costs (compare the sdk and baseline sub-benchmarks of one run)
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

## bench-compare: SDK against the raw client in one process, interleaved and repeated (ratios for the README),
## then the chart of its judged rows (tools/benchchart, run from the tools module so that the SDK's go.mod
## carries no plotting dependencies)
## (BENCH_N messages per window, BENCH_REPEATS repeats, BENCH_ONLY the start of the names of the comparisons to run (BENCH_ONLY=latency: latency under load alone), BENCH_OUT a copy of the tables,
## BENCH_PULSAR_URL a broker outside the process instead of the embedded one, BENCH_PROFILE a directory for a CPU profile
## of every measured window and every capacity burst, BENCH_FLOOR_EXTRA a duration: the consume floor also runs with a
## handler that spends that much CPU a message, BENCH_CHART the SVG to write:
## docs/perf/bench-compare-embedded.svg, or docs/perf/bench-compare-pulsar.svg with BENCH_PULSAR_URL; empty, no chart;
## the judged rows it is drawn from are kept beside it, as .json, and the run's tables as .md (unless BENCH_OUT names
## another file), so that the chart can be redrawn and the README's tables checked without a new run, with
## `cd tools && go run ./benchchart -in ../docs/perf/bench-compare-embedded.json -out ../docs/perf/bench-compare-embedded.svg`)
BENCH_N       ?= 20000
BENCH_REPEATS ?= 5
BENCH_TIMEOUT ?= 3h
BENCH_CHART   ?= docs/perf/bench-compare-$(if $(BENCH_PULSAR_URL),pulsar,embedded).svg
## what the run measured, printed under each run's first line (a test binary knows neither its dependencies'
## versions nor its commit): the client's version that go.mod selects, and the tree's commit ("-dirty": uncommitted changes)
BENCH_BUILT_FROM ?= pulsar-client-go $(shell $(GO) list -m -f '{{.Version}}' github.com/apache/pulsar-client-go), commit $(shell git describe --always --dirty --abbrev=7 2>/dev/null || echo unknown)
bench-compare:
	set -e; \
	out="$(if $(BENCH_OUT),$(abspath $(BENCH_OUT)))"; \
	if [ -n "$(BENCH_CHART)" ]; then json="$(abspath $(basename $(BENCH_CHART))).json"; mkdir -p "$$(dirname "$$json")"; \
		[ -n "$$out" ] || out="$(abspath $(basename $(BENCH_CHART))).md"; \
	else json=$$(mktemp); trap 'rm -f "$$json"' EXIT; fi; \
	BENCH_COMPARE=1 BENCH_N=$(BENCH_N) BENCH_REPEATS=$(BENCH_REPEATS) BENCH_ONLY="$(BENCH_ONLY)" BENCH_FLOOR_EXTRA="$(BENCH_FLOOR_EXTRA)" BENCH_PULSAR_URL="$(BENCH_PULSAR_URL)" BENCH_OUT="$$out" BENCH_JSON="$$json" \
		BENCH_BUILT_FROM="$(BENCH_BUILT_FROM)" \
		BENCH_PROFILE="$(if $(BENCH_PROFILE),$(abspath $(BENCH_PROFILE)))" \
		$(GO) test -count=1 -timeout=$(BENCH_TIMEOUT) -run='^TestCompare$$' -v ./internal/benchcompare; \
	if [ -n "$(BENCH_CHART)" ]; then \
		mkdir -p "$(dir $(abspath $(BENCH_CHART)))"; \
		(cd tools && GOWORK=off $(GO) run ./benchchart -in "$$json" -out "$(abspath $(BENCH_CHART))"); \
		echo "bench-compare: the chart of the judged rows is $(BENCH_CHART), drawn from $(basename $(BENCH_CHART)).json; the run's tables are in $$out"; \
	fi

## bench-instructions: the instructions a message that the SDK's pipeline (BenchmarkPipelineSuccess, package
## pulsar) runs beyond its contract floor (BenchmarkPipelineFloor), counted under Valgrind's cachegrind, in all and
## function by function (tools/instructions): the engine's own work a message, free of the machine's noise.
## BENCH_FIRST and BENCH_SECOND name two other benchmarks of package BENCH_PKG (pulsar), without their Benchmark
## prefix, a sub-benchmark after a slash (BENCH_FIRST=PublishPath/recycled BENCH_SECOND=PublishFloor; the decoder's
## general path against its canonical one: BENCH_PKG=envelope BENCH_FIRST=ClassifyParts/scan-general
## BENCH_SECOND=ClassifyParts/scan; the contract floor against the consume targets' reference: BENCH_FIRST=PipelineFloor
## BENCH_SECOND=PipelineReference).
## Needs valgrind (Debian: apt-get install valgrind); about 20 seconds
BENCH_PKG    ?= pulsar
BENCH_FIRST  ?= PipelineSuccess
BENCH_SECOND ?= PipelineFloor
bench-instructions:
	set -e; dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	$(GO) test -c -o "$$dir/pkg.test" ./$(BENCH_PKG); \
	cd tools && GOWORK=off $(GO) run ./instructions -bin "$$dir/pkg.test" -dir ../$(BENCH_PKG) -first "$(BENCH_FIRST)" -second "$(BENCH_SECOND)"

## fuzz: every Fuzz* target of the module, FUZZTIME each, on top of the seed corpus. The
## targets are found with `go test -list '^Fuzz' ./...` (tools/fuzz/run.sh), so a new one is
## fuzzed without editing this file. A crasher is written to testdata/fuzz/<FuzzName>/ of its
## package: fix the bug and commit that file there, as a regression case `go test` replays.
fuzz:
	GO="$(GO)" FUZZTIME="$(FUZZTIME)" bash tools/fuzz/run.sh
	GOWORK=off GO="$(GO)" FUZZTIME="$(FUZZTIME)" FUZZ_MODULE=tools bash tools/fuzz/run.sh

cover:
	$(GO) test -race -covermode=atomic -coverprofile=cover.out ./...
	$(GO) tool cover -func=cover.out | tail -1

generate:
	GOWORK=off $(GO) generate ./...

## generate-check: generated code (mocks, protobuf) is fresh
generate-check: generate
	git diff --exit-code -- . ':(exclude)go.sum' ':(exclude)examples/go.sum' ':(exclude)go.work.sum'

## tidy-check: every module's go.mod matches its imports
tidy-check:
	for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy) || exit 1; done
	git diff --exit-code $(foreach m,$(MODULES),$(m)/go.mod $(m)/go.sum)

## conformance: the canonical cross-SDK suite (when ../shared is present) and our own
conformance:
	@if [ -f "$(SUITE)/manifest.json" ]; then \
		$(GO) run ./cmd/bq conformance --suite "$(SUITE)"; \
	else \
		echo "conformance: canonical suite not found at $(SUITE); skipped"; \
	fi
	$(GO) run ./cmd/bq conformance --suite conformance/testdata/suite

## fidelity: pulsar-client-go's own package tests (from the module cache) against `bq broker`, one process each
fidelity:
	bash tools/fidelity/run.sh

## fidelity-calibrate: the same tests against `bq broker` and a real Apache Pulsar (tools/pulsar, with the
## client's own standalone.conf), side by side: what fails on real Pulsar too is harness or configuration
fidelity-calibrate:
	FIDELITY_TARGET=both bash tools/fidelity/run.sh

## pulsar: a real Apache Pulsar standalone broker (tools/pulsar: Maven Central jars, no Docker) in the
## foreground, at pulsar://127.0.0.1:16650 and http://127.0.0.1:18080; Ctrl-C stops it and removes its data
pulsar:
	bash tools/pulsar/start.sh --foreground

## ci: what .ci/run runs
ci:
	bash .ci/run
