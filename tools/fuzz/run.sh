#!/usr/bin/env bash
# Fuzzing pass: runs every Fuzz* target of the module for FUZZTIME each, on top of its seed
# corpus (the f.Add seeds and the files in testdata/fuzz/<FuzzName>/ of its package). The
# targets are found with `go test -list '^Fuzz' ./...`, so a new Fuzz* function is fuzzed
# without editing this script. It stops at the first failure.
#
# A failure writes the crashing input to testdata/fuzz/<FuzzName>/ of the package: fix the
# bug, then commit that file, where plain `go test` replays it as a regression case.
#
# Go 1.26's fuzzing coordinator has a race at the end of a -fuzztime duration (fixed in Go
# 1.27): when the deadline fires it can report "context deadline exceeded" as the target's
# failure although no input failed. That signature (the bare line right after "--- FAIL:",
# with no new file in the target's testdata/fuzz directory) is not a finding, so the target
# is fuzzed again, at most twice. Any other failure, or a new input file, stops the pass.
#
# Environment:
#   FUZZTIME     time per target (default 30s)
#   GO           the go command (default go)
#   FUZZ_MODULE  the module to fuzz, a directory of the repository (default ., the SDK's; tools
#                is outside the workspace, so fuzz it with GOWORK=off)
set -euo pipefail
cd "$(dirname "$0")/../.."
cd "${FUZZ_MODULE:-.}"

go=${GO:-go}
fuzztime=${FUZZTIME:-30s}

if ! list=$("$go" test -list '^Fuzz' ./...); then
  printf '%s\n' "$list"
  echo "fuzz: listing the fuzz targets failed" >&2
  exit 1
fi
# go test -list prints a package's matching names, then its "ok <package> <time>" line.
targets=$(printf '%s\n' "$list" | awk '/^Fuzz/ { f[n++] = $1; next } /^ok/ { for (i = 0; i < n; i++) print $2 " " f[i]; n = 0 }')
if [ -z "$targets" ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
count=$(printf '%s\n' "$targets" | wc -l)
echo "fuzz: $count targets, $fuzztime each"
start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
raced=0
# corpus prints the input files the target's package holds for it, one a line.
corpus() { find "$1/testdata/fuzz/$2" -type f 2>/dev/null | sort || true; }
while read -r pkg name; do
  dir=$("$go" list -f '{{.Dir}}' "$pkg")
  for attempt in 1 2 3; do
    echo "==> $name ($pkg)"
    before=$(corpus "$dir" "$name")
    rc=0
    "$go" test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" -fuzzminimizetime=5s "$pkg" \
      2>&1 | tee "$log" || rc=$?
    [ "$rc" -eq 0 ] && break
    if [ "$attempt" -lt 3 ] && [ "$(corpus "$dir" "$name")" = "$before" ] &&
      grep -A1 -- "^--- FAIL: $name " "$log" | grep -qx '    context deadline exceeded'; then
      raced=$((raced + 1))
      echo "fuzz: $name: the coordinator's deadline race, no input failed; fuzzing it again"
      continue
    fi
    echo "fuzz: $name failed" >&2
    exit "$rc"
  done
done <<<"$targets"
echo "fuzz: $count targets passed in $(( $(date +%s) - start ))s ($raced runs ended by the coordinator's deadline race and were repeated)"
