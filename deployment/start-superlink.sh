#!/usr/bin/env bash
# Start a SuperLink in the background with TLS, SuperNode authentication and the loopback gate.
#
#   deployment/start-superlink.sh [--insecure] STATE_DIR CERT_DIR [HOST] [PORT]
#
# CERT_DIR holds ca.crt, superlink.crt and superlink.key (python -m deployment.credentials). The SuperLink
# listens on HOST:PORT (default 0.0.0.0:9093). SuperNodes connect to any of its addresses (Fleet API); the
# Control API (flwr run/ls/stop/log, flwr supernode register) and the ServerApp's Runtime API answer only on
# 127.0.0.1:PORT from this machine (deployment/loopback_gate.py). HOST must be 0.0.0.0, ::, 127.0.0.1 or ::1.
# STATE_DIR receives superlink.db (registered SuperNodes and runs survive a restart), superlink.log and
# superlink.pid. --insecure (testing only) turns TLS and authentication off; CERT_DIR is then ignored.
# The interpreter is that of the environment where the app is installed (pip install .): $PYTHON, else the active
# virtual environment, else the project's .venv, else python3 (deployment/python-env.sh).
set -euo pipefail
insecure=0
if [[ "${1:-}" == "--insecure" ]]; then insecure=1; shift; fi
if [[ $# -lt 2 ]]; then sed -n '2,13p' "$0"; exit 2; fi
state=$1 certs=$2 host=${3:-0.0.0.0} port=${4:-9093}
source "$(dirname "$0")/python-env.sh"
# Refuse here, not only in the background process, a HOST the gate cannot protect (and a missing install).
"$python" -c 'import os, sys; from deployment.gated_superlink import refuse_if_unprotected as refuse
refuse(sys.argv[1:], os.environ)' --host "$host" || exit 1
mkdir -p "$state"
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
setsid "$python" -m deployment.gated_superlink \
  "${security[@]}" --host "$host" --port "$port" --database "$state/superlink.db" \
  --disable-runtime-dependency-installation >>"$state/superlink.log" 2>&1 </dev/null &
echo $! >"$state/superlink.pid"
echo "SuperLink PID $(cat "$state/superlink.pid") on $host:$port (Control API: 127.0.0.1:$port only)"
echo "log: $state/superlink.log"
