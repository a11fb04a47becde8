#!/usr/bin/env bash
# Stops the Pulsar standalone broker that tools/pulsar/start.sh started, and removes its data
# directory (unless PULSAR_KEEP is set). Idempotent: nothing running, nothing to do.
#
#   tools/pulsar/stop.sh                  # uses PULSAR_PID / PULSAR_DATA from start.sh's output
#   tools/pulsar/stop.sh /path/to/data    # or the data directory (its pulsar.pid)
#
# SIGTERM first (the broker's shutdown hook closes topics, the bookie and the metadata store),
# then, after PULSAR_STOP_TIMEOUT seconds (30), SIGKILL. The broker runs in its own session
# and process group, which both signals address.
set -euo pipefail

log() { printf 'pulsar: %s\n' "$*" >&2; }

data=${1:-${PULSAR_DATA:-}}
pid=${PULSAR_PID:-}
if [ -z "$pid" ] && [ -n "$data" ] && [ -f "$data/pulsar.pid" ]; then
  pid=$(cat "$data/pulsar.pid")
fi
wait_s=${PULSAR_STOP_TIMEOUT:-30}
if [ -z "$pid" ] && [ -z "$data" ]; then
  log "nothing to stop: pass the data directory, or export PULSAR_PID / PULSAR_DATA"
  exit 0
fi

# Only a java PulsarStandaloneStarter process is ours to signal: a stale pid file must not
# kill whatever reused the pid.
ours() {
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'org.apache.pulsar.PulsarStandaloneStarter'
}
signal() { # signal the process group the broker leads, else the process alone
  kill "-$1" -- "-$pid" 2>/dev/null || kill "-$1" "$pid" 2>/dev/null || true
}

if ours; then
  log "stopping Pulsar standalone (pid $pid)"
  signal TERM
  deadline=$((SECONDS + wait_s))
  while ours && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.5; done
  if ours; then
    log "still running after ${wait_s}s: SIGKILL"
    signal KILL
    for _ in $(seq 1 20); do ours || break; sleep 0.5; done
  fi
  # A zombie (our own child, when start.sh --foreground calls this) keeps its cmdline empty.
  ours && { log "pid $pid did not exit"; exit 1; }
  log "stopped"
elif [ -n "$pid" ]; then
  log "no Pulsar standalone running as pid $pid"
fi

if [ -n "$data" ] && [ -d "$data" ]; then
  if [ -n "${PULSAR_KEEP:-}" ]; then
    log "kept the data directory $data (PULSAR_KEEP)"
  elif [ -f "$data/pulsar.pid" ] || [ -f "$data/standalone.conf" ]; then
    rm -rf -- "$data"
    log "removed $data"
  else
    log "$data does not look like a start.sh data directory: left alone"
  fi
fi
