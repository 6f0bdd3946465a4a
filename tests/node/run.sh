#!/usr/bin/env bash
# The official openai npm client, and the npm gRPC client for Generate, against cgn-router (+
# cgn-fake-engine and cgn-engine-sim upstreams), under
# node's built-in test runner. Exit code = result.
#
#   tests/node/run.sh                         # binaries from build/bin
#   CGN_BIN_DIR=/path/to/bin tests/node/run.sh
#
# Installs the pinned npm package (package-lock.json) when node_modules is missing or stale.
set -euo pipefail
cd "$(dirname "$0")"
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 1; }
done
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
  echo "run.sh: node >= 20 needed, found $(node --version)" >&2
  exit 1
fi
stamp=node_modules/.package-lock.json
if [[ ! -f $stamp || package-lock.json -nt $stamp ]]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
export CGN_BIN_DIR="${CGN_BIN_DIR:-$(cd ../.. && pwd)/build/bin}"
exec node --test --test-reporter=spec --test-concurrency=1 --test-timeout=60000 openai_client.test.mjs \
  openai_tools.test.mjs openai_responses.test.mjs \
  grpc_generate.test.mjs
