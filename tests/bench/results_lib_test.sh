#!/usr/bin/env bash
# scripts/lib/results.sh: a run gets a new folder, an existing folder or file is never
# overwritten, and the provenance block names the revision, the command and the machine.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/results.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=1; }

dir=$(new_results_dir "$tmp/run") || fail "new_results_dir could not create a new folder"
[ "$dir" = "$tmp/run" ] && [ -d "$dir" ] || fail "new_results_dir printed '$dir'"
new_results_dir "$tmp/run" >/dev/null 2>&1 && fail "new_results_dir accepted an existing folder"
touch "$tmp/run/report.md"
refuse_overwrite "$tmp/run/other.md" || fail "refuse_overwrite rejected a new file"
refuse_overwrite "$tmp/run/other.md" "$tmp/run/report.md" 2>/dev/null && fail "refuse_overwrite accepted an existing file"
RESULT_DIR="$tmp/given" use_results_dir a.md b.md || fail "use_results_dir refused a new folder"
[ -d "$tmp/given" ] || fail "use_results_dir did not create the caller's folder"
touch "$tmp/given/b.md"
(RESULT_DIR="$tmp/given" use_results_dir a.md b.md 2>/dev/null) && fail "use_results_dir accepted a folder holding b.md"
(RESULT_DIR="$tmp/given" use_results_dir c.md) || fail "use_results_dir refused a folder without c.md"
case "$(results_revision)" in
  "$(git rev-parse --short=10 HEAD)" | "$(git rev-parse --short=10 HEAD)-dirty") ;;
  *) fail "results_revision gave '$(results_revision)'" ;;
esac
p=$(provenance "RUNS=1 scripts/bench-proxy.sh build")
grep -q "^- Revision: $(git rev-parse HEAD)" <<<"$p" || fail "no revision in: $p"
grep -q '^- Command: `RUNS=1 scripts/bench-proxy.sh build`' <<<"$p" || fail "no command in: $p"
grep -q "^- Machine: $(nproc) × " <<<"$p" || fail "no machine in: $p"
[ "$fails" -eq 0 ] && echo "results lib: ok"
exit "$fails"
