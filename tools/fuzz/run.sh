#!/usr/bin/env bash
# Fuzzing pass: runs every Fuzz* target of the module for FUZZTIME each, on top of its seed
# corpus (the f.Add seeds and the files in testdata/fuzz/<FuzzName>/ of its package). The
# targets are found with `go test -list '^Fuzz' ./...`, so a new Fuzz* function is fuzzed
# without editing this script. It stops at the first failure.
#
# A failure writes the crashing input to testdata/fuzz/<FuzzName>/ of the package: fix the
# bug, then commit that file, where plain `go test` replays it as a regression case.
#
# Environment:
#   FUZZTIME  time per target (default 30s)
#   GO        the go command (default go)
set -euo pipefail
cd "$(dirname "$0")/../.."

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
while read -r pkg name; do
  echo "==> $name ($pkg)"
  "$go" test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" -fuzzminimizetime=5s "$pkg"
done <<<"$targets"
echo "fuzz: $count targets passed in $(( $(date +%s) - start ))s"
