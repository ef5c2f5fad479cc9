#!/usr/bin/env bash
# Stop what start-superlink.sh / start-supernode.sh started in the given STATE_DIRs, by the PIDs they saved.
#
#   deployment/stop.sh STATE_DIR [STATE_DIR ...]
#
# SuperNodes first, then the SuperLink: a SuperNode signs off from the SuperLink when it stops, and one that could
# not (its SuperLink already gone, or killed) stays "online" there for up to 60 s (2 heartbeats), during which
# the same node starting again is refused (Flower's exit code 305).
# Each process leads its own process group (setsid), so the signal reaches what it started in that group too (a
# SuperNode's SuperExec and ClientApps). The SuperLink's SuperExec, and the ServerApp that one starts, run in a
# session of their own (Flower detaches them): they are not signalled, they watch their parent's PID (a running
# ServerApp records its run as interrupted within seconds, then may retry the gone SuperLink); this script waits
# for them too.
# SIGTERM first; SIGKILL for whatever is left after 10 s.
set -uo pipefail

# stop PID...: SIGTERM to each PID's process group, wait for those groups and those its children lead, SIGKILL after 10 s.
stop() {
  local pid group alive
  local groups=()
  for pid in "$@"; do
    groups+=("$pid")
    for group in $(ps -o pgid= --ppid "$pid" 2>/dev/null); do
      [[ "$group" != "$pid" ]] && groups+=("$group")
    done
  done
  for pid in "$@"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for _ in $(seq 1 20); do
    alive=0
    for group in "${groups[@]}"; do kill -0 -- "-$group" 2>/dev/null && alive=1; done
    (( alive )) || return 0
    sleep 0.5
  done
  for group in "${groups[@]}"; do kill -KILL -- "-$group" 2>/dev/null; done
}

for kind in supernode superlink; do
  pids=()
  for state in "$@"; do
    file="$state/$kind.pid"
    [[ -f "$file" ]] && pids+=("$(cat "$file")") && rm -f "$file"
  done
  (( ${#pids[@]} )) && stop "${pids[@]}"
done
exit 0
