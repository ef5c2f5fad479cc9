#!/usr/bin/env bash
# Start a SuperLink in the background with TLS, SuperNode authentication and the loopback gate.
#
#   deployment/start-superlink.sh [--insecure] STATE_DIR CERT_DIR [HOST] [PORT]
#
# CERT_DIR holds ca.crt, superlink.crt and superlink.key (python -m deployment.credentials). The SuperLink
# listens on HOST:PORT (default 0.0.0.0:9093). SuperNodes connect to any of its addresses (Fleet API); the
# Control API (flwr run/ls/stop/log, flwr supernode register) and the ServerApp's Runtime API answer only on
# 127.0.0.1:PORT from this machine (deployment/loopback_gate.py). HOST must be 0.0.0.0, ::, 127.0.0.1 or ::1.
# STATE_DIR receives superlink.db (registered SuperNodes and runs survive a restart), superlink.log, superlink.pid
# and flwr-home/ (the copies of the app its ServerApps install): one STATE_DIR per SuperLink. The script refuses a
# STATE_DIR whose SuperLink is still running, and exits 1 with the log's last lines when the SuperLink stops during its
# start (PORT in use) or is not serving within SUPERLINK_START_SECONDS (60). --insecure (testing only) turns TLS and
# authentication off; CERT_DIR is then ignored.
# The interpreter is that of the environment where the app is installed (pip install .): $PYTHON, else the active
# virtual environment, else the project's .venv, else python3 (deployment/python-env.sh).
set -euo pipefail
insecure=0
if [[ "${1:-}" == "--insecure" ]]; then insecure=1; shift; fi
if [[ $# -lt 2 ]]; then sed -n '2,16p' "$0"; exit 2; fi
state=$1 certs=$2 host=${3:-0.0.0.0} port=${4:-9093}
wait_seconds=${SUPERLINK_START_SECONDS:-60}
if [[ ! "$wait_seconds" =~ ^[1-9][0-9]{0,5}$ ]]; then
  echo "error: SUPERLINK_START_SECONDS must be a whole number of seconds from 1 to 999999: '$wait_seconds'" >&2
  exit 2
fi
source "$(dirname "$0")/python-env.sh"
# Refuse here, not only in the background process, a HOST the gate cannot protect (and a missing install).
"$python" -c 'import os, sys; from deployment.gated_superlink import refuse_if_unprotected as refuse
refuse(sys.argv[1:], os.environ)' --host "$host" || exit 1
# A second start with the same STATE_DIR would overwrite superlink.pid, and stop.sh would no longer find the first.
if [[ -f "$state/superlink.pid" ]] && old=$(<"$state/superlink.pid") \
    && [[ "$(ps -o args= -p "$old" 2>/dev/null)" == *deployment.gated_superlink* ]]; then
  echo "error: the SuperLink of $state is already running (PID $old); stop it first: deployment/stop.sh $state" >&2
  exit 1
fi
mkdir -p "$state/flwr-home"
if (( insecure )); then
  security=(--insecure)
else
  for f in ca.crt superlink.crt superlink.key; do
    [[ -r "$certs/$f" ]] \
      || { echo "missing $certs/$f (create it with: python -m deployment.credentials --out $certs)" >&2; exit 1; }
  done
  security=(--ssl-ca-certfile "$certs/ca.crt" --ssl-certfile "$certs/superlink.crt" --ssl-keyfile "$certs/superlink.key"
            --enable-supernode-auth)
fi
# setsid: the SuperLink leads its own process group, so stop.sh can stop it and its children by PID.
# FLWR_HOME: the ServerApps' installed app copies stay in STATE_DIR, as in fedft-superlink.service.
log_start=$(($(stat -c %s "$state/superlink.log" 2>/dev/null || echo 0) + 1))
FLWR_HOME="$state/flwr-home" setsid "$python" -m deployment.gated_superlink \
  "${security[@]}" --host "$host" --port "$port" --database "$state/superlink.db" \
  --disable-runtime-dependency-installation >>"$state/superlink.log" 2>&1 </dev/null &
pid=$!
echo $pid >"$state/superlink.pid"
show_log_end() { tail -c "+$log_start" "$state/superlink.log" | tail -n 8 >&2; }  # what this start logged
# Wait (up to SUPERLINK_START_SECONDS, default 60) until it serves, so that a SuperLink that stops at start (PORT in
# use, a bad certificate) or is not serving by then is reported here rather than only in its log.
serving=0 deadline=$((SECONDS + wait_seconds))
while :; do  # checked once more after the last wait
  if ! kill -0 "$pid" 2>/dev/null; then
    rm -f "$state/superlink.pid"
    echo "error: the SuperLink stopped during its start; the end of $state/superlink.log:" >&2
    show_log_end
    exit 1
  fi
  [[ "$(tail -c "+$log_start" "$state/superlink.log")" == *"Uvicorn running on"* ]] && { serving=1; break; }
  (( SECONDS < deadline )) || break
  sleep 0.5
done
if (( ! serving )); then
  echo "error: the SuperLink (PID $pid) is not serving after $wait_seconds s; it is left running, as it may still be" \
       "starting (a slow machine: SUPERLINK_START_SECONDS=300), or stop it: deployment/stop.sh $state;" \
       "the end of $state/superlink.log:" >&2
  show_log_end
  exit 1
fi
echo "SuperLink PID $pid on $host:$port (Control API: 127.0.0.1:$port only)"
echo "log: $state/superlink.log"
