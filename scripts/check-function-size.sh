#!/usr/bin/env bash
# No function in src/ longer than MAX_LINES (default 120) outside tests, and no main() longer than
# MAX_MAIN (default 30): long functions hide logic no unit test reaches. Function extents come from
# universal-ctags (its `end:` field); test, integration, e2e and fuzz sources are exempt.
#
#   scripts/check-function-size.sh [--report]   # --report: the 20 longest and the longest main()
# ROOT=DIR checks another checkout (scripts/bench-revisions.sh measures an older revision with it).
set -euo pipefail
cd "${ROOT:-$(dirname "$0")/..}"
MAX_LINES=${MAX_LINES:-120}
MAX_MAIN=${MAX_MAIN:-30}
command -v ctags >/dev/null || { echo "check-function-size: universal-ctags is missing (scripts/bootstrap.sh)" >&2; exit 1; }
ctags --version 2>/dev/null | grep -q "Universal Ctags" ||
  { echo "check-function-size: ctags is not Universal Ctags (apt-get install universal-ctags)" >&2; exit 1; }
# The tracked sources (a tree without git, e.g. an unpacked source package: every .cpp under src/).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list_sources() { git ls-files 'src/*.cpp'; }
else
  list_sources() { find src -name '*.cpp' | sort; }
fi
mapfile -t files < <(list_sources | grep -Ev '_(test|itest|e2e|fuzz)\.cpp$')
# One line per function: LENGTH FILE:LINE NAME (lambdas are counted inside their function).
sizes=$(ctags --languages=C++ --c++-kinds=+f --fields=+ne --output-format=u-ctags -f - "${files[@]}" 2>/dev/null |
  awk -F'\t' '$4 == "f" && $1 !~ /^__anon/ {
    line = ""; end = ""
    for (i = 5; i <= NF; i++) { if ($i ~ /^line:/) line = substr($i, 6); if ($i ~ /^end:/) end = substr($i, 5) }
    if (end != "") print end - line + 1, $2 ":" line, $1 }' | sort -rn)
if [[ ${1:-} == --report ]]; then
  awk 'NR <= 20' <<<"$sizes"
  echo "longest main(): $(awk '$3 == "main" { print; exit }' <<<"$sizes")"
  exit 0
fi
[[ -n $sizes ]] || { echo "check-function-size: ctags found no functions in ${#files[@]} files" >&2; exit 1; }
long=$(echo "$sizes" | awk -v max="$MAX_LINES" '$1 > max')
mains=$(echo "$sizes" | awk -v max="$MAX_MAIN" '$3 == "main" && $1 > max')
status=0
if [[ -n $long ]]; then
  echo "check-function-size: functions over $MAX_LINES lines (length, where, name):" >&2
  echo "$long" | sed 's/^/  /' >&2
  status=1
fi
if [[ -n $mains ]]; then
  echo "check-function-size: main() over $MAX_MAIN lines (a thin main over an application object):" >&2
  echo "$mains" | sed 's/^/  /' >&2
  status=1
fi
if ((status == 0)); then
  echo "check-function-size: $(wc -l <<<"$sizes") functions in ${#files[@]} files; longest $(awk 'NR == 1' <<<"$sizes")"
fi
exit $status
