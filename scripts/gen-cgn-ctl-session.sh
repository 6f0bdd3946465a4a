#!/usr/bin/env bash
# docs/examples/cgn-ctl-session.md: a transcript of cgn-ctl (status, nodes, routes explain, drain,
# policy set) against a local etcd cluster of 2 agents (scripts/local-cluster-etcd.sh).
#   scripts/gen-cgn-ctl-session.sh [OUT]     BIN (default build/bin) must hold the daemons and cgn-ctl
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$PWD/docs/examples/cgn-ctl-session.md}"
CGN_PORT=0 CGN_NODES=2 CGN_DEMO_ROUNDS=2 CGN_CTL_SESSION="$out" exec scripts/local-cluster-etcd.sh
