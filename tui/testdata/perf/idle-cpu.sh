#!/usr/bin/env bash
# Idle console CPU, from /proc/PID/schedstat (every thread's run time, in ns).
# usage: BIN=./limitscope tui/testdata/perf/idle-cpu.sh [SECONDS=120] [WIDTH=120] [HEIGHT=40]
# Starts the console in a private tmux server on the embedded simulator with a fresh HOME (no
# keys, no --state, the history on), waits 5 s for start-up, then reads the run time of all its
# threads and their context switches over SECONDS with nothing typed: nothing on screen changes and
# no countdown shows. Prints the CPU as a share of one core and the context switches per second.
set -euo pipefail
BIN=${BIN:-./limitscope}
SECS=${1:-120}; W=${2:-120}; H=${3:-40}
home=$(mktemp -d)
tm=(tmux -L limitscope-idle)
"${tm[@]}" kill-server 2>/dev/null || true
trap '"${tm[@]}" kill-server 2>/dev/null || true; rm -rf "$home"' EXIT
"${tm[@]}" new-session -d -s idle -x "$W" -y "$H" \
  "exec env -i HOME=$home TERM=xterm-256color PATH=/usr/bin:/bin $(realpath "$BIN") 2>/dev/null"
sleep 5
pid=$("${tm[@]}" display -p -t idle '#{pane_pid}')
sample() { # prints: run-ns context-switches
  local ns=0 cs=0 t a b
  for t in /proc/"$pid"/task/*; do
    read -r a _ < "$t/schedstat" || continue
    ns=$((ns + a))
    b=$(awk '/^(non)?voluntary_ctxt_switches/ {s += $2} END {print s+0}' "$t/status" 2>/dev/null || echo 0)
    cs=$((cs + b))
  done
  echo "$ns $cs"
}
read -r ns1 cs1 < <(sample); t1=$(date +%s.%N)
sleep "$SECS"
read -r ns2 cs2 < <(sample); t2=$(date +%s.%N)
awk -v ns=$((ns2 - ns1)) -v cs=$((cs2 - cs1)) -v t1="$t1" -v t2="$t2" -v w="$W" -v h="$H" 'BEGIN {
  wall = t2 - t1
  printf "idle console %dx%d over %.0f s: %.4f%% of a core (%.1f ms of CPU), %.1f context switches/s\n",
    w, h, wall, ns / (wall * 1e9) * 100, ns / 1e6, cs / wall }'
