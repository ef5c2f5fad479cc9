#!/usr/bin/env bash
# Stop what start-superlink.sh / start-supernode.sh started in the given STATE_DIRs, by the PIDs they saved.
#
#   deployment/stop.sh STATE_DIR [STATE_DIR ...]
#
# Each process leads its own process group (setsid), so the signal reaches what it started in that group too (a
# SuperNode's SuperExec and ClientApps). The SuperLink's SuperExec, and the ServerApp that one starts, run in a
# session of their own (Flower detaches them): they are not signalled, they watch their parent's PID and exit a few
# seconds after it (a running ServerApp first records its run as interrupted); this script waits for them too.
# SIGTERM first; SIGKILL for whatever is left after 10 s.
set -uo pipefail
pids=()
for state in "$@"; do
  for file in "$state"/*.pid; do
    [[ -f "$file" ]] && pids+=("$(cat "$file")") && rm -f "$file"
  done
done
# The process groups to wait for: each saved PID's, and those its children lead (the SuperLink's SuperExec).
groups=()
for pid in "${pids[@]}"; do
  groups+=("$pid")
  for group in $(ps -o pgid= --ppid "$pid" 2>/dev/null); do
    [[ "$group" != "$pid" ]] && groups+=("$group")
  done
done
for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
for _ in $(seq 1 20); do
  alive=0
  for group in "${groups[@]}"; do kill -0 -- "-$group" 2>/dev/null && alive=1; done
  (( alive )) || exit 0
  sleep 0.5
done
for group in "${groups[@]}"; do kill -KILL -- "-$group" 2>/dev/null; done
exit 0
