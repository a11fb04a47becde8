#!/usr/bin/env bash
# Flake hunt: runs the race suite N times, each run with -count=1 and its own shuffle seed,
# and reports every test that failed at least once, with how often, the first line that
# says why, and the seeds of the runs it failed in (replay one with
# `go test -race -count=1 -shuffle=SEED ./PKG`).
#
# Environment:
#   N        how many runs (default 10)
#   PKGS     the packages (default ./...)
#   RACE     set to 0 to run without the race detector (default: with it)
#   FLAKE_DIR  keep each run's go test -json output there (default: a temporary directory,
#            removed at the end)
# Exit status: 0 when no test failed in any run, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."

n=${N:-10}
pkgs=${PKGS:-./...}
case "$n" in '' | *[!0-9]* | 0) echo "flake: N must be a whole number above 0, not '$n'" >&2; exit 2 ;; esac
race=(-race)
[ "${RACE:-1}" = 0 ] && race=()

dir=${FLAKE_DIR:-}
if [ -z "$dir" ]; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/flake.XXXXXX")
  trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir"
tool="$dir/testfails"
go build -o "$tool" ./internal/cmd/testfails

start=$(date +%s)
seeds=()
for i in $(seq "$n"); do
  seed=$(( $(date +%s%N) % 1000000000 ))
  seeds+=("$seed")
  t0=$(date +%s)
  # go test exits non-zero when a test fails: that is what is being counted, not a reason to stop.
  go test "${race[@]}" -count=1 -shuffle="$seed" -json $pkgs >"$dir/run-$i.json" 2>&1 || true
  verdict=$("$tool" "$dir/run-$i.json" | tail -1) || true # exit 1 names failures, counted below
  echo "flake: run $i of $n (seed $seed) in $(( $(date +%s) - t0 ))s: ${verdict#testfails: 1 run, }"
done

files=()
for i in $(seq "$n"); do files+=("$dir/run-$i.json"); done
rc=0
"$tool" -max 200 "${files[@]}" || rc=$?
if [ "$rc" -eq 1 ]; then
  for i in $(seq "$n"); do
    if ! "$tool" "$dir/run-$i.json" >/dev/null; then
      echo "flake: run $i failed; replay it with -shuffle=${seeds[$((i - 1))]}"
    fi
  done
fi
echo "flake: $n runs of go test ${race[*]} -count=1 $pkgs in $(( $(date +%s) - start ))s"
exit "$rc"
