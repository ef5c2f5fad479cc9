"""Running the app as real SuperLink / SuperNode processes: credentials, per-node data, the loopback gate, scripts."""
