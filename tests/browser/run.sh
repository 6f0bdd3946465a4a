#!/usr/bin/env bash
# Browser tests of the fleet dashboard (dashboard/): headless Debian chromium driven by
# playwright-core under node's built-in test runner. Exit code = result.
#
#   tests/browser/run.sh                      # against dashboard/mock_metrics.py (started here)
#   tests/browser/run.sh --endpoint URL       # against a real router's /metrics as well
#
# Installs the pinned npm packages (package-lock.json) when they are missing or stale; never
# downloads a browser: chromium comes from Debian (apt-get install chromium).
set -euo pipefail
cd "$(dirname "$0")"

endpoint="${CGN_DASHBOARD_ENDPOINT:-}"
while (($#)); do
  case "$1" in
    --endpoint) endpoint="${2:?--endpoint needs a URL}"; shift 2 ;;
    --endpoint=*) endpoint="${1#--endpoint=}"; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

chromium="${CGN_CHROMIUM:-/usr/bin/chromium}"
if [[ ! -x $chromium ]]; then
  echo "run.sh: $chromium not found: install Debian's chromium (apt-get install -y chromium)" >&2
  exit 1
fi
for tool in node npm python3; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 1; }
done
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
  echo "run.sh: node >= 20 needed, found $(node --version)" >&2
  exit 1
fi

# npm ci when node_modules is missing or older than the lock file.
stamp=node_modules/.package-lock.json
if [[ ! -f $stamp || package-lock.json -nt $stamp ]]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

export CGN_DASHBOARD_ENDPOINT="$endpoint"
export CGN_CHROMIUM="$chromium"
# --test-timeout bounds each test and each file's run as a whole: an outer bound, not a target.
# A dashboard file that takes ~15 s on an idle host took over 60 s beside a benchmark on 2 cores.
exec node --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000 \
  prom.test.mjs metric_names.test.mjs dashboard.test.mjs
