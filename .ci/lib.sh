# Shared by .ci/run (sourced, never run): steps with logs, the shuffle seed, and the exit
# trap that stops what the run started and, when a step failed, ends the output with the
# step's name and its failing tests (internal/cmd/testfails, built into $logs by the caller)
# or, when it ran no failing test, its last lines; a failed run keeps its logs directory
# (CI_KEEP_LOGS=0 removes it) and names it on its last line. internal/toolcheck drives it with a
# failing test to pin that the last 30 lines name the test and its first error line.
start=$(date +%s)
seed=${CI_SHUFFLE_SEED:-$(( $(date +%s%N) % 1000000000 ))}
logs=$(mktemp -d "${TMPDIR:-/tmp}/ci-logs.XXXXXX")
step_name="start" step_log="$logs/00-start.log" step_json="" step_n=0
stops=() # commands that stop the services this run started, run by the trap

# step starts a step: its header goes to the output and its log.
step() {
  step_n=$((step_n + 1))
  step_name=$*
  step_log=$(printf '%s/%02d.log' "$logs" "$step_n")
  step_json=""
  printf '\n==> %s (%ss)\n' "$*" "$(( $(date +%s) - start ))" | tee "$step_log"
}

# run runs a command of the current step, its output to the terminal and the step's log.
run() { "$@" 2>&1 | tee -a "$step_log"; }

# kill_tree stops the descendants of a process, deepest first.
kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null || true); do
    kill_tree "$child"
    kill -TERM "$child" 2>/dev/null || true
  done
}

finish() {
  local rc=$? i
  trap - EXIT INT TERM
  set +e
  for ((i = ${#stops[@]} - 1; i >= 0; i--)); do eval "${stops[$i]}" >>"$logs/stops.log" 2>&1; done
  kill_tree $$
  if [ "$rc" -ne 0 ]; then
    echo
    echo "==> FAILED: $step_name (exit $rc after $(( $(date +%s) - start ))s; shuffle seed $seed)"
    local found=0 src=$step_log
    if [ -n "$step_json" ] && [ -s "$step_json" ]; then src=$step_json; fi
    if [ -x "$logs/testfails" ] && "$logs/testfails" -max 20 -title "--- failing tests, each with the line that says why:" "$src" >"$logs/digest" 2>&1; then
      : # the step ran no failing test
    elif [ -s "$logs/digest" ] && grep -q '^FAIL ' "$logs/digest"; then
      cat "$logs/digest"
      found=1
    fi
    if [ "$found" -eq 0 ]; then
      echo "--- the step's last lines:"
      grep -v '^[[:space:]]*$' "$step_log" | tail -n 20
    fi
    echo "replay the order: CI_SHUFFLE_SEED=$seed bash .ci/run"
    # Kept for the post-mortem: every step's log and the real broker's log
    # (pulsar-standalone.log), which a broker that stopped answering leaves the only witness.
    [ "${CI_KEEP_LOGS:-1}" = 0 ] && rm -rf "$logs" || echo "the run's logs (each step's, the real broker's): $logs"
  else
    rm -rf "$logs"
  fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# apt_get installs Debian packages (as root, or through sudo).
apt_get() {
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq >/dev/null
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# apt_install installs Debian packages when the command named first is missing.
apt_install() {
  local cmd=$1
  shift
  command -v "$cmd" >/dev/null 2>&1 || apt_get "$@"
}

