#!/usr/bin/env bash
# Runs commands as named phases, one after the other or one in the
# background beside the others, and prints, at the end, each phase's wall
# time and peak memory, then the slowest test packages and the builds of the
# control plane and the peers, read from the phases' output. Source it, then
# call "phase NAME COMMAND..." for each phase; the table is printed when the
# shell exits, whether the phases passed or not.
#
# Peak memory is sampled every second: "tree" is the largest sum of the RSS
# of every process the phase started, "largest" the largest single process
# (GNU time's maximum resident set size, when /usr/bin/time exists). "cpu"
# is the user and system time of the phase's processes that were waited for
# (GNU time's, too): on a machine whose cores are all busy, the phases' cpu
# is what a change must cut to shorten the run.

phases_dir=$(mktemp -d)
phases_log="$phases_dir/all.log"
phases_start=$(date +%s)
: >"$phases_dir/table"

# phases_tree_rss SID: the RSS, in kB, of every process of session SID; 0
# once the session has ended (ps then fails, which must not end the caller
# under errexit and pipefail).
phases_tree_rss() { { ps -s "$1" -o rss= 2>/dev/null || true; } | awk '{s+=$1} END {print s+0}'; }

phase() {
  local name=$1; shift
  local start peak=0 now rc timefile="$phases_dir/time-$name" pid
  start=$(date +%s)
  printf '\n=== phase %s: %s\n' "$name" "$*"
  local timer=()
  [ -x /usr/bin/time ] && timer=(/usr/bin/time -f '%M %U %S' -o "$timefile")
  : >"$timefile"
  # A session of its own, so that every process the phase starts is counted.
  setsid "${timer[@]}" "$@" > >(tee -a "$phases_log") 2> >(tee -a "$phases_log" >&2) &
  pid=$!
  echo "$pid" >"$phases_dir/sid-$name"
  while kill -0 "$pid" 2>/dev/null; do
    now=$(phases_tree_rss "$pid")
    [ "$now" -gt "$peak" ] && peak=$now
    sleep 1
  done
  wait "$pid" && rc=0 || rc=$?
  # What the phase left running goes with it: a test binary that panics
  # skips its cleanup and leaves its control planes behind, which would
  # take CPU from every later phase.
  pkill -KILL -s "$pid" 2>/dev/null || true
  rm -f "$phases_dir/sid-$name"
  local largest="-" cpu="-" rss user sys
  if [ -s "$timefile" ]; then
    read -r rss user sys < <(tail -n 1 "$timefile")
    largest="$(( rss / 1024 )) MB"
    cpu="$(printf '%.0f' "$(echo "$user + $sys" | bc)")s"
  fi
  printf '%-14s %6ss %7s %9s %12s %s\n' "$name" "$(( $(date +%s) - start ))" "$cpu" "$(( peak / 1024 )) MB" "$largest" \
    "$([ "$rc" -eq 0 ] && echo ok || echo "FAILED ($rc)")" >>"$phases_dir/table"
  return "$rc"
}

# background NAME COMMAND...: phase NAME, run while the next phases run. Its
# output goes to a file of its own, so that it does not interleave with
# theirs; await NAME waits for it, prints that output, and fails as it
# failed. A background phase never awaited (an earlier phase failed) is
# killed at the end, and its output printed.
declare -A phases_bg=()
#
# The phase writes its status to a file, which await reads: bash forgets the
# status of a child that has ended once a later child of the shell gets its
# PID, and with pid_max at 32768 a run forks enough processes for that
# (wait then fails with 127, "not a child of this shell").
background() {
  local name=$1
  ( phases_log=/dev/null; rc=0; phase "$@" || rc=$?; echo "$rc" >"$phases_dir/rc-$name"; exit "$rc" ) \
    >"$phases_dir/bg-$name.log" 2>&1 &
  phases_bg[$name]=$!
}
await() {
  local name=$1 rc=0
  wait "${phases_bg[$name]}" 2>/dev/null || rc=$?
  [ -s "$phases_dir/rc-$name" ] && rc=$(cat "$phases_dir/rc-$name")
  unset "phases_bg[$name]"
  phases_show "$name"
  return "$rc"
}
# phases_show NAME: the output of background phase NAME, on stdout and in
# the log the report reads.
phases_show() {
  local file="$phases_dir/bg-$1.log"
  [ -f "$file" ] || return 0
  printf '\n=== output of the background phase %s\n' "$1"
  tee -a "$phases_log" <"$file"
  rm -f "$file"
}

phases_report() {
  local rc=$? name sid i
  # A background phase still running: its processes are a session of their
  # own, whose ID it writes once started (wait a little for a phase that
  # has only just begun).
  for name in "${!phases_bg[@]}"; do
    for i in 1 2 3 4 5 6 7 8 9 10; do
      [ -s "$phases_dir/sid-$name" ] || ! kill -0 "${phases_bg[$name]}" 2>/dev/null && break
      sleep 0.5
    done
  done
  # Every phase still running (the one in the foreground too, when the run
  # was stopped) is killed.
  for sid in "$phases_dir"/sid-*; do
    [ -s "$sid" ] && { pkill -KILL -s "$(cat "$sid")" 2>/dev/null || true; }
  done
  for name in "${!phases_bg[@]}"; do
    wait "${phases_bg[$name]}" 2>/dev/null || true
    phases_show "$name"
  done
  {
    printf '\n=== phases (wall time, cpu time, peak RSS of the phase'"'"'s processes, largest process)\n'
    printf '%-14s %7s %7s %9s %12s %s\n' phase wall cpu tree largest result
    cat "$phases_dir/table"
    printf '%-14s %6ss\n' total "$(( $(date +%s) - phases_start ))"
    printf '\n=== the 20 slowest test packages\n'
    grep -E '^(ok|FAIL)[[:space:]]+[^[:space:]]+[[:space:]]+[0-9.]+s' "$phases_log" | awk '{t=$3; sub(/s$/,"",t); printf "%8.1fs  %s\n", t, $2}' | sort -rn | head -n 20 || true
    printf '\n=== the 15 slowest tests run with -v\n'
    grep -E '^--- (PASS|FAIL): [^ ]+ \([0-9.]+s\)' "$phases_log" | sed -E 's/^--- (PASS|FAIL): ([^ ]+) \(([0-9.]+)s\)/\3 \2 \1/' | sort -rn | head -n 15 | awk '{printf "%8.1fs  %s %s\n", $1, $2, $3}' || true
    printf '\n=== parts of the make targets\n'
    grep -E '^make timing: ' "$phases_log" | sed 's/^make timing: //' || echo "(none)"
    printf '\n=== builds of the control plane and the peers\n'
    grep -E '^(kube|stack|cabpk[a-z-]*): (building|  done in)' "$phases_log" || echo "(none: all were cached)"
  } >&2
  rm -rf "$phases_dir"
  return "$rc"
}
trap phases_report EXIT
