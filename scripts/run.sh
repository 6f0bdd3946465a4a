#!/usr/bin/env bash
# `make run`: the main job. Until the gateway exists this lists what is built.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
echo "Cognitora $(git describe --always --dirty 2>/dev/null || echo dev)"
if [[ -x $BIN/cgn-router ]]; then
  exec scripts/local-cluster.sh "$@"
fi
echo "Built binaries in $BIN:"
found=0
for b in "$BIN"/cgn-*; do
  [[ -x $b ]] || continue
  found=1
  echo "  $(basename "$b")"
done
((found)) || echo "  (none yet)"
echo "The gateway (cgn-router) is not built yet; run 'make test' to exercise the libraries."
