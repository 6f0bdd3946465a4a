#!/usr/bin/env bash
# scripts/check-standalone.sh must pass on a clean tree and fail on each kind of outside
# reference. Runs the lint against a throw-away git repository.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git init -q "$tmp/repo"
mkdir -p "$tmp/repo/scripts" "$tmp/repo/docs" "$tmp/repo/bench/results/2020-01-01"
cp "$src/scripts/check-standalone.sh" "$tmp/repo/scripts/"
lint() { (cd "$tmp/repo" && git add -A && scripts/check-standalone.sh) >"$tmp/out" 2>&1; }

printf 'See docs/design/principles.md and ../README.md; RFC 9110 section 7.\n' >"$tmp/repo/docs/ok.md"
# Old results keep their wording; only path rules apply there.
printf 'Report (issue #8), DESIGN.md rules.\n' >"$tmp/repo/bench/results/2020-01-01/report.md"
lint || { cat "$tmp/out"; echo "FAIL: clean tree rejected"; exit 1; }

fails=0
sibling="shar""ed"  # assembled, so this file does not itself spell the reference
for bad in "traces in ../$sibling/traces" "path /work/$sibling/x" 'see /home/alice/notes' 'cd /root/x' \
           'as DESIGN.md says' 'fixed in issue #12' 'see PR #7'; do
  printf '%s\n' "$bad" >"$tmp/repo/docs/bad.md"
  if lint; then
    echo "FAIL: not rejected: $bad"
    fails=1
  elif ! grep -q 'docs/bad.md' "$tmp/out"; then
    cat "$tmp/out"
    echo "FAIL: rejected without naming the file: $bad"
    fails=1
  fi
done
printf '/work/%s in an old report\n' "$sibling" >"$tmp/repo/bench/results/2020-01-01/report.md"
rm "$tmp/repo/docs/bad.md"
if lint; then
  echo "FAIL: a machine path under bench/results was not rejected"
  fails=1
fi
mkdir "$tmp/not-a-repo"
if "$tmp/repo/scripts/check-standalone.sh" "$tmp/not-a-repo" >"$tmp/out" 2>&1; then
  echo "FAIL: a folder that is not a git checkout passed"
  fails=1
fi
[ "$fails" -eq 0 ] && echo "check-standalone self-test: ok"
exit "$fails"
