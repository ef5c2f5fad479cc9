#!/usr/bin/env bash
# Start a SuperNode in the background, connected to the SuperLink over TLS and authenticated by its key.
#
#   deployment/start-supernode.sh [--insecure] STATE_DIR SUPERLINK_ADDRESS CA_CERT PRIVATE_KEY PORT NODE_CONFIG
#
#   SUPERLINK_ADDRESS  host:port of the SuperLink
#   CA_CERT            ca.crt, to verify the SuperLink's certificate
#   PRIVATE_KEY        this node's supernode-<i> key (its .pub was registered with `flwr supernode register`)
#   PORT               a free local port for the SuperNode's ClientApp API (one per SuperNode on a host)
#   NODE_CONFIG        e.g. 'partition-id=0 num-partitions=3 data-path="/data/node-0"' (device="cuda" on a Jetson),
#                      or the path of a .toml file with these keys (deployment/fedft-node.toml)
#
# STATE_DIR receives supernode.log, supernode.pid and the node's Flower home (installed apps): keep it outside the
# app's project folder, and give each SuperNode on a host its own (and its own PORT); the script refuses a STATE_DIR
# whose SuperNode is still running. flower-supernode is taken from the app's environment (deployment/python-env.sh).
# --insecure (testing only) connects without TLS or authentication; CA_CERT and PRIVATE_KEY are then ignored.
set -euo pipefail
insecure=0
if [[ "${1:-}" == "--insecure" ]]; then insecure=1; shift; fi
if [[ $# -lt 6 ]]; then sed -n '2,16p' "$0"; exit 2; fi
state=$1 superlink=$2 ca=$3 key=$4 port=$5 node_config=$6
source "$(dirname "$0")/python-env.sh"
# A second start with the same STATE_DIR would overwrite supernode.pid, and stop.sh would no longer find the first.
if [[ -f "$state/supernode.pid" ]] && old=$(<"$state/supernode.pid") \
    && [[ "$(ps -o args= -p "$old" 2>/dev/null)" == *flower-supernode* ]]; then
  echo "error: the SuperNode of $state is already running (PID $old); stop it first: deployment/stop.sh $state" >&2
  exit 1
fi
mkdir -p "$state/flwr-home"
if (( insecure )); then
  security=(--insecure)
else
  security=(--root-certificates "$ca" --auth-supernode-private-key "$key")
fi
FLWR_HOME="$state/flwr-home" setsid "$scripts/flower-supernode" "${security[@]}" --superlink "$superlink" \
  --host 127.0.0.1 --port "$port" --node-config "$node_config" ${SUPERNODE_EXTRA_ARGS:-} \
  >>"$state/supernode.log" 2>&1 </dev/null &
echo $! >"$state/supernode.pid"
echo "SuperNode PID $(cat "$state/supernode.pid"); log $state/supernode.log"
