#!/usr/bin/env bash
# Starts a real Apache Pulsar standalone broker (the version pinned in tools/pulsar/pom.xml),
# from Maven Central jars: no Docker, no distribution tarball.
#
#   eval "$(tools/pulsar/start.sh)"    # background; prints PULSAR_URL=... lines for the shell
#   tools/pulsar/start.sh --foreground # a developer's broker; Ctrl-C stops it
#
# In the background mode stdout carries exactly these lines, once the broker is healthy, its
# public/default namespace exists and its transaction coordinator is ready:
#   PULSAR_URL=pulsar://127.0.0.1:16650
#   PULSAR_ADMIN_URL=http://127.0.0.1:18080
#   PULSAR_VERSION=4.0.N
#   PULSAR_PID=<java pid>
#   PULSAR_DATA=<data directory>
# Everything else goes to stderr. On failure the tail of the broker's log goes to stderr,
# what was started is stopped, and the exit status is non-zero. tools/pulsar/stop.sh stops it.
#
# Environment (all optional): PULSAR_PORT (16650), PULSAR_HTTP_PORT (18080),
# PULSAR_BOOKIE_PORT (13181), PULSAR_DATA (a fresh mktemp directory), PULSAR_M2 (local Maven
# repository, ~/.m2/repository), PULSAR_CACHE (classpath cache, ~/.cache/babelqueue-pulsar),
# PULSAR_START_TIMEOUT (180 seconds), PULSAR_MEM, PULSAR_GC, PULSAR_EXTRA_OPTS (JVM flags),
# PULSAR_LOG_LEVEL (info), PULSAR_KEEP (keep the data directory on stop or failure),
# PULSAR_CONF_EXTRA (a properties file appended after standalone.conf, before the ports),
# PULSAR_AUTH_TOKEN (a token the readiness checks authenticate with, for an overlay that turns
# authentication on), JAVA_HOME, MVN. See tools/pulsar/README.md.
# shellcheck disable=SC2317 # the readiness checks are called through wait_for
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

foreground=false
case "${1:-}" in
  "") ;;
  --foreground|-f) foreground=true ;;
  -h|--help) sed -n '2,/^# shellcheck/{/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 0 ;;
  *) echo "start.sh: unknown argument: $1 (use --foreground or nothing)" >&2; exit 2 ;;
esac

log() { printf 'pulsar: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

port=${PULSAR_PORT:-16650}
http_port=${PULSAR_HTTP_PORT:-18080}
bookie_port=${PULSAR_BOOKIE_PORT:-13181}
case "$(uname -s)" in Darwin|*BSD) bookie_if=${PULSAR_BOOKIE_INTERFACE:-lo0} ;; *) bookie_if=${PULSAR_BOOKIE_INTERFACE:-lo} ;; esac
m2=${PULSAR_M2:-$HOME/.m2/repository}
cache=${PULSAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/babelqueue-pulsar}
timeout=${PULSAR_START_TIMEOUT:-180}
mvn=${MVN:-mvn}

version=$(sed -n 's:.*<pulsar.version>\(.*\)</pulsar.version>.*:\1:p' "$here/pom.xml")
[ -n "$version" ] || die "no <pulsar.version> in $here/pom.xml"

# --- Java 17 or newer ---------------------------------------------------------------------
if [ -n "${JAVA_HOME:-}" ]; then
  java=$JAVA_HOME/bin/java
elif command -v java >/dev/null 2>&1; then
  java=$(command -v java)
else
  die "no java: set JAVA_HOME or put Java 17+ on PATH"
fi
java_major=$("$java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
case "$java_major" in
  1.*|9|1[0-6]|"") die "Pulsar $version needs Java 17 or newer; $java is ${java_major:-unknown}" ;;
esac

# --- classpath, from Maven, cached by the pom's hash ----------------------------------------
# The cached file names jars under $m2 by absolute path, so the key covers $m2 too.
key=$( (cat "$here/pom.xml" "$here/settings.xml"; printf '%s' "$m2") | sha256sum | cut -c1-16)
cp_file=$cache/classpath-$version-$key.txt
cp_ok() {
  [ -s "$cp_file" ] || return 1
  local IFS=: jar
  # shellcheck disable=SC2013 # one line of ':'-separated paths, split on IFS=:
  for jar in $(cat "$cp_file"); do [ -f "$jar" ] || return 1; done
}
if ! cp_ok; then
  command -v "$mvn" >/dev/null 2>&1 || die "no Maven ($mvn) to resolve Pulsar $version's classpath"
  mkdir -p "$cache" "$m2"
  log "resolving Pulsar $version's classpath with Maven into $m2 (once; cached in $cp_file)"
  tmp_cp=$(mktemp "$cache/classpath.XXXXXX")
  if ! "$mvn" -B -q -s "$here/settings.xml" -f "$here/pom.xml" -Dmaven.repo.local="$m2" \
      dependency:build-classpath -Dmdep.includeScope=runtime -Dmdep.outputFile="$tmp_cp" >&2; then
    rm -f "$tmp_cp"
    die "Maven could not resolve Pulsar $version's classpath"
  fi
  mv "$tmp_cp" "$cp_file"
fi
classpath=$(cat "$cp_file")

# --- an optional overlay of the test configuration ------------------------------------------
extra=${PULSAR_CONF_EXTRA:-}
if [ -n "$extra" ]; then
  [ -r "$extra" ] || die "PULSAR_CONF_EXTRA=$extra is not a readable file"
  extra=$(cd "$(dirname "$extra")" && pwd)/$(basename "$extra")
fi
# The last value of a key in the configuration as the broker will read it (the last one wins).
conf_value() { sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" "$here/standalone.conf" ${extra:+"$extra"} | tail -n 1 | tr -d '[:space:]'; }
tls_port=$(conf_value brokerServicePortTls)
https_port=$(conf_value webServicePortTls)

# --- ports must be free -------------------------------------------------------------------
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$port" "$http_port" "$bookie_port"; do
  if in_use "$p"; then
    die "127.0.0.1:$p is already in use (set PULSAR_PORT, PULSAR_HTTP_PORT or PULSAR_BOOKIE_PORT)"
  fi
done
for p in $tls_port $https_port; do
  if in_use "$p"; then
    die "127.0.0.1:$p (a TLS listener of the configuration) is already in use"
  fi
done

# --- a fresh data directory ---------------------------------------------------------------
if [ -n "${PULSAR_DATA:-}" ]; then
  data=$PULSAR_DATA
  mkdir -p "$data"
  [ -z "$(ls -A "$data")" ] || die "PULSAR_DATA=$data is not empty: the broker starts on a fresh directory"
  data=$(cd "$data" && pwd)
else
  data=$(mktemp -d "${TMPDIR:-/tmp}/pulsar-standalone.XXXXXX")
fi
mkdir -p "$data/logs" "$data/tmp"
log_file=$data/logs/pulsar-standalone.log

# The test configuration, then the overlay, with this run's ports and paths last (the last
# key wins).
conf=$data/standalone.conf
{
  cat "$here/standalone.conf"
  if [ -n "$extra" ]; then
    printf '\n### --- PULSAR_CONF_EXTRA=%s --- ###\n' "$extra"
    cat "$extra"
  fi
  printf '\n### --- set by start.sh --- ###\n'
  printf 'brokerServicePort=%s\n' "$port"
  printf 'webServicePort=%s\n' "$http_port"
  printf 'narExtractionDirectory=%s\n' "$data/nar"
  # The bookie binds to this interface's address (advertisedAddress, 127.0.0.1) instead of
  # 0.0.0.0 only when listeningInterface is set.
  printf 'listeningInterface=%s\n' "$bookie_if"
} >"$conf"

# --- JVM flags, after Pulsar's bin/pulsar and conf/pulsar_env.sh ---------------------------
mem=${PULSAR_MEM:--Xms256m -Xmx1g -XX:MaxDirectMemorySize=1g}
gc=${PULSAR_GC:--XX:+UseG1GC -XX:MaxGCPauseMillis=10 -XX:+ParallelRefProcEnabled -XX:+DisableExplicitGC}
# shellcheck disable=SC2206 # word splitting of the flag strings is intended
jvm=(
  $mem $gc
  "-Xlog:gc:$data/logs/pulsar_gc.log:time,uptime:filecount=2,filesize=20M"
  -cp "$classpath"
  -Djava.io.tmpdir="$data/tmp"
  # metadata (ZooKeeper's client buffer), IPv4
  -Djute.maxbuffer=10485760 -Djava.net.preferIPv4Stack=true
  # Netty may use reflection; module access for BookKeeper, Netty, JVM and cgroup metrics
  -Dio.netty.tryReflectionSetAccessible=true
  --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.util.zip=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/jdk.internal.misc=ALL-UNNAMED
  --add-opens java.base/sun.net=ALL-UNNAMED
  --add-opens java.management/sun.management=ALL-UNNAMED
  --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
  --add-opens java.base/jdk.internal.platform=ALL-UNNAMED
  # BookKeeper finds Pulsar's metadata-store drivers (metadata-store:rocksdb://...)
  -Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver
  -Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver
  # ZooKeeper flags bin/pulsar passes to the standalone (no ZooKeeper runs here; harmless)
  "-Dzookeeper.4lw.commands.whitelist=*" -Dzookeeper.snapshot.trust.empty=true
  -Dzookeeper.tcpKeepAlive=true -Dzookeeper.clientTcpKeepAlive=true
  # allocator and recycler defaults of conf/pulsar_env.sh
  -Dpulsar.allocator.exit_on_oom=true
  -Dio.netty.recycler.maxCapacity.default=1000 -Dio.netty.recycler.linkCapacity=1024
  # logging: one file in the data directory; the starter shuts log4j down itself
  -Dlog4j.configurationFile="$here/log4j2.xml"
  -Dlog4j.shutdownHookEnabled=false
  -Dlog4j2.is.webapp=false
  -Dlog4j2.contextSelector=org.apache.logging.log4j.core.async.AsyncLoggerContextSelector
  -Dlog4j2.enableThreadlocals=true -Dlog4j2.enableDirectEncoders=true
  -Dpulsar.log.dir="$data/logs" -Dpulsar.log.file=pulsar-standalone.log
  -Dpulsar.log.level="${PULSAR_LOG_LEVEL:-info}"
  ${PULSAR_EXTRA_OPTS:-}
  org.apache.pulsar.PulsarStandaloneStarter
  --config "$conf"
  --no-functions-worker --no-stream-storage
  --metadata-dir "$data/metadata"
  --bookkeeper-dir "$data/bookkeeper"
  --bookkeeper-port "$bookie_port"
)

# --- start, in its own session, stdout/stderr to a file, no stdin --------------------------
# setsid execs java in place (a background child of a script leads no process group), so $!
# is the java pid; stop.sh signals its whole process group.
cd "$data"
setsid "$java" "${jvm[@]}" </dev/null >"$data/logs/stdout.log" 2>&1 &
pid=$!
echo "$pid" >"$data/pulsar.pid"
echo "$version" >"$data/pulsar.version"

stop_it() { PULSAR_PID=$pid PULSAR_DATA=$data "$here/stop.sh" >&2 || true; }
fail() {
  log "$*"
  log "last 60 lines of $log_file:"
  tail -n 60 "$log_file" >&2 2>/dev/null || true
  if [ -s "$data/logs/stdout.log" ]; then
    log "last 20 lines of the JVM's own output ($data/logs/stdout.log):"
    tail -n 20 "$data/logs/stdout.log" >&2
  fi
  if [ -s "$data/logs/txn-ready.out" ]; then
    log "last lines of the transaction probe ($data/logs/txn-ready.out):"
    tail -n 5 "$data/logs/txn-ready.out" >&2
  fi
  stop_it
  exit 1
}
trap 'log "interrupted"; stop_it; exit 130' INT TERM

admin=http://127.0.0.1:$http_port
url=pulsar://127.0.0.1:$port
if $foreground; then
  printf 'PULSAR_URL=%s\nPULSAR_ADMIN_URL=%s\nPULSAR_VERSION=%s\nPULSAR_PID=%s\nPULSAR_DATA=%s\n' \
    "$url" "$admin" "$version" "$pid" "$data"
fi
log "starting Pulsar $version standalone (pid $pid, data $data, log $log_file)"

# --- wait until it is really usable -------------------------------------------------------
# With authentication on (an overlay's), the checks present PULSAR_AUTH_TOKEN; TxnReady.java
# reads it from the environment.
auth=()
[ -z "${PULSAR_AUTH_TOKEN:-}" ] || auth=(-H "Authorization: Bearer $PULSAR_AUTH_TOKEN")
get() { curl -s -m 5 ${auth[@]+"${auth[@]}"} "$admin$1" 2>/dev/null || true; }
started=$SECONDS
deadline=$((SECONDS + timeout))
wait_for() { # description, command...
  local what=$1; shift
  until "$@"; do
    kill -0 "$pid" 2>/dev/null || fail "the broker exited while waiting for: $what"
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${timeout}s waiting for: $what"
    sleep 1
  done
  log "$what: ok after $((SECONDS - started))s"
}
healthy() { [ "$(get /admin/v2/brokers/health)" = ok ]; }
has_default_ns() { get /admin/v2/namespaces/public | grep -q '"public/default"'; }
# Pulsar 4.0 loads a transaction coordinator only when a transactional client first connects
# to it, so no admin endpoint can report one ready before that: TxnReady.java (the broker's
# own Java client, run as a source file) opens and aborts a transaction, which loads the
# coordinators and proves they serve; then every coordinator must report state Ready.
txn_ready() {
  "$java" -Xmx256m -XX:TieredStopAtLevel=1 -cp "$classpath" -Djava.io.tmpdir="$data/tmp" \
    -Dlog4j.configurationFile="$here/log4j2.xml" -Dlog4j2.is.webapp=false \
    -Dpulsar.log.dir="$data/logs" -Dpulsar.log.file=txn-ready.log \
    "$here/TxnReady.java" "$url" </dev/null >"$data/logs/txn-ready.out" 2>&1
}
tc_ready() {
  local n i states
  n=$(get /admin/v2/persistent/pulsar/system/transaction_coordinator_assign/partitions |
    sed -n 's/.*"partitions" *: *\([0-9]*\).*/\1/p')
  [ "${n:-0}" -gt 0 ] || return 1
  for ((i = 0; i < n; i++)); do
    states=$(get "/admin/v3/transactions/coordinatorStats?coordinatorId=$i" | grep -o '"state" *: *"[A-Za-z]*"')
    case "$states" in *'"Ready"') ;; *) return 1 ;; esac
  done
}
wait_for "broker health" healthy
wait_for "namespace public/default" has_default_ns
wait_for "a transaction round trip" txn_ready
wait_for "every transaction coordinator Ready" tc_ready

if ! $foreground; then
  trap - INT TERM
  printf 'PULSAR_URL=%s\nPULSAR_ADMIN_URL=%s\nPULSAR_VERSION=%s\nPULSAR_PID=%s\nPULSAR_DATA=%s\n' \
    "$url" "$admin" "$version" "$pid" "$data"
  exit 0
fi

# --- foreground: follow the log until Ctrl-C or the broker exits --------------------------
log "ready at $url (admin $admin); Ctrl-C stops it"
tail -n 0 -F "$log_file" >&2 &
tail_pid=$!
on_exit() { kill "$tail_pid" 2>/dev/null || true; stop_it; }
trap 'exit 130' INT TERM
trap on_exit EXIT
status=0
wait "$pid" || status=$?
log "the broker exited with status $status"
exit "$status"
