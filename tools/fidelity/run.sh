#!/usr/bin/env bash
# Fidelity suite: runs the package tests of github.com/apache/pulsar-client-go/pulsar (the version in go.mod)
# against `bq broker`, each test in its own process, and closes with "N passed, M failed, K skipped".
#
# The client's tests are taken from the Go module cache at run time (go mod download) and copied to a
# temporary directory; nothing of them enters this repository. The broker gets the client's reference
# settings (its integration-tests/conf/standalone.conf): pulsar://localhost:6650, admin on
# http://localhost:8080, pulsar+ssl://localhost:6651, https://localhost:8443, max message size 1 MiB,
# batch-index acks, auto-split Key_Shared ranges, token, basic and TLS authentication.
#
# Environment:
#   FIDELITY_RUN      regular expression selecting tests (default: all, minus tools/fidelity/exclude.txt)
#   FIDELITY_TIMEOUT  per-test timeout (default 120s)
#   FIDELITY_KEEP     set to keep the temporary directory
#   FIDELITY_VERBOSE  set to print the output of failed tests
#   FIDELITY_BQ       a prebuilt bq binary to use instead of building ./cmd/bq
#   FIDELITY_RETRIES  how often a failed test is run again before it counts as failed (default 1);
#                     a test that passes on a retry counts as passed and is listed as flaky, so
#                     a timing-sensitive client test on a loaded machine (some wait 1 s for a
#                     reconnect) does not fail the run, while a test that fails every time does
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
run_re=${FIDELITY_RUN:-.}
retries=${FIDELITY_RETRIES:-1}
timeout=${FIDELITY_TIMEOUT:-120s}

version=$(go list -m -f '{{.Version}}' github.com/apache/pulsar-client-go)
dir=$(go mod download -json "github.com/apache/pulsar-client-go@$version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "fidelity: go mod download gave no directory for pulsar-client-go@$version" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fidelity.XXXXXX")
broker_pid=
cleanup() {
	if [ -n "$broker_pid" ]; then
		kill "$broker_pid" 2>/dev/null || true
		wait "$broker_pid" 2>/dev/null || true
	fi
	if [ -z "${FIDELITY_KEEP:-}" ]; then
		chmod -R u+w "$tmp" 2>/dev/null || true
		rm -rf "$tmp"
	else
		echo "fidelity: kept $tmp" >&2
	fi
}
trap cleanup EXIT

start=$(date +%s)
cp -r "$dir" "$tmp/client"
chmod -R u+w "$tmp/client"

# Build the client's package tests with this module's dependency versions (all in the module cache once
# this module builds): a throw-away module that replaces the client by the copy.
mkdir "$tmp/shim"
sed 's#^module .*#module fidelityshim#' go.mod >"$tmp/shim/go.mod"
cp go.sum "$tmp/shim/go.sum"
echo "replace github.com/apache/pulsar-client-go => ../client" >>"$tmp/shim/go.mod"
printf 'package fidelityshim\n' >"$tmp/shim/shim.go"
modcache=$(go env GOMODCACHE)
echo "fidelity: building the tests of pulsar-client-go $version" >&2
(cd "$tmp/shim" &&
	GOFLAGS=-mod=mod GONOSUMDB='*' GONOSUMCHECK=1 GOSUMDB=off \
		GOPROXY="file://$modcache/cache/download,$(go env GOPROXY)" \
		go test -c -o "$tmp/pulsar.test" github.com/apache/pulsar-client-go/pulsar)
if [ -n "${FIDELITY_BQ:-}" ]; then
	cp "$FIDELITY_BQ" "$tmp/bq"
else
	go build -o "$tmp/bq" ./cmd/bq
fi

# TLS, authentication and authorization as in the client's standalone.conf and its CI script: the
# client's own certificates and token key (from the copy), basic user admin, anonymous clients get the
# role "anonymous", private/auth is granted to token-principal and public/default to anonymous.
conf="$tmp/client/integration-tests"
"$tmp/bq" broker --addr localhost:6650 --admin-addr localhost:8080 \
	--tls-addr localhost:6651 --admin-tls-addr localhost:8443 \
	--tls-cert-file "$conf/certs/broker-cert.pem" --tls-key-file "$conf/certs/broker-key.pem" \
	--tls-trust-certs-file "$conf/certs/cacert.pem" --auth-tls \
	--auth-token-secret-file "$conf/tokens/secret.key" --auth-basic admin:123456 \
	--anonymous-role anonymous --super-user localhost --super-user superUser --super-user admin \
	--grant private/auth=token-principal --grant public/default=anonymous \
	--max-message-size 1048576 --batch-index-ack --key-shared-selector auto-split --backlog-quota-check-interval 5s \
	>"$tmp/broker.out" 2>"$tmp/broker.log" &
broker_pid=$!
for _ in $(seq 100); do
	if (exec 3<>/dev/tcp/127.0.0.1/6650) 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/8443) 2>/dev/null; then
		break
	fi
	kill -0 "$broker_pid" 2>/dev/null || { cat "$tmp/broker.log" >&2; exit 2; }
	sleep 0.1
done

declare -A excluded=()
while read -r name reason; do
	case "$name" in '' | '#'*) continue ;; esac
	excluded[$name]=$reason
done <tools/fidelity/exclude.txt

passed=0 failed=0 skipped=0
failures=()
flaky=()
cd "$tmp/client/pulsar" # the tests read ../integration-tests/...
for t in $("$tmp/pulsar.test" -test.list "$run_re" | grep '^Test'); do
	if [ -n "${excluded[$t]:-}" ]; then
		continue
	fi
	t0=$(date +%s.%N)
	tries=0
	while :; do
		set +e
		"$tmp/pulsar.test" -test.run "^$t\$" -test.v -test.count=1 -test.timeout "$timeout" >"$tmp/$t.log" 2>&1
		rc=$?
		set -e
		if [ $rc -eq 0 ] || [ "$tries" -ge "$retries" ]; then
			break
		fi
		tries=$((tries + 1))
		cp "$tmp/$t.log" "$tmp/$t.failed-$tries.log"
	done
	if [ $rc -eq 0 ] && [ "$tries" -gt 0 ]; then
		flaky+=("$t")
	fi
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
	if [ $rc -eq 0 ] && grep -q "^--- SKIP: $t " "$tmp/$t.log"; then
		skipped=$((skipped + 1))
		echo "SKIP $t ${secs}s"
	elif [ $rc -eq 0 ]; then
		passed=$((passed + 1))
		echo "PASS $t ${secs}s"
	else
		failed=$((failed + 1))
		failures+=("$t")
		echo "FAIL $t ${secs}s"
		if [ -n "${FIDELITY_VERBOSE:-}" ]; then
			grep -v '^time=\|level=' "$tmp/$t.log" | tail -40 | sed 's/^/    /'
		fi
	fi
done
echo "fidelity: excluded ${#excluded[@]} tests (tools/fidelity/exclude.txt); took $(($(date +%s) - start))s"
if [ ${#flaky[@]} -gt 0 ]; then
	echo "fidelity: passed only on a retry (flaky): ${flaky[*]}"
fi
if [ ${#failures[@]} -gt 0 ]; then
	echo "fidelity: failed: ${failures[*]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
