#!/usr/bin/env bash
# Fails when a tracked file refers to something outside this repository: the reference folder
# that sat beside the checkout during development (named in `sibling` below), an absolute path of a build machine (/work/, /home/<user>/, /root/), a design
# document that is not in the repo (DESIGN.md) or an issue tracker entry by bare number ("issue #12",
# "PR #34"). Everything a reader, a test or a script needs must be in the clone.
#
# Usage: scripts/check-standalone.sh [REPO_DIR]   (default: this checkout)
#
# bench/results/<date>/ folders are records written by the revision they name; only the path
# rules apply to them, since their wording is that revision's.
set -euo pipefail

repo=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$repo"
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-standalone: $repo is not a git checkout; the lint reads the tracked files" >&2
  exit 2
fi
# This script and its test spell out what they look for.
self=(":(exclude)scripts/check-standalone.sh" ":(exclude)tests/standalone/check_standalone_test.sh")

# One extended regex per rule, then @@ and the reason printed when it matches.
# The sibling folder's name is assembled, so this file does not itself spell the reference.
sibling="shar""ed"
path_rules=(
  '\.\./'"$sibling"'([/"'"'"'` ]|$)@@sibling folder ../'"$sibling"
  '(^|[^[:alnum:]_.~-])/work/@@absolute path /work/'
  '(^|[^[:alnum:]_.~-])/home/[a-z_][a-z0-9_-]*/@@absolute home path'
  '(^|[^[:alnum:]_.~-])/root/@@absolute path /root/'
)
text_rules=(
  'DESIGN\.md@@a design document outside the repo (write the rule into docs/design/)'
  '([Ii]ssues?|PR|[Pp]ull request) #[0-9]@@an issue number (say what it is about, or link it in full)'
)

status=0
check() {  # rule, pathspec...
  local pattern=${1%%@@*} reason=${1#*@@}
  shift
  local hits rc=0
  hits=$(git grep -n -I -E -e "$pattern" -- "$@" "${self[@]}") || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "check-standalone: $reason:" >&2
    echo "$hits" | sed 's/^/  /' >&2
    status=1
  elif [ "$rc" -ne 1 ]; then
    echo "check-standalone: git grep failed ($rc)" >&2
    exit 2
  fi
}
for rule in "${path_rules[@]}"; do
  check "$rule" .
done
for rule in "${text_rules[@]}"; do
  check "$rule" . ':(exclude)bench/results/'
done
if [ "$status" -eq 0 ]; then
  echo "check-standalone: $(git ls-files | wc -l) tracked files refer to nothing outside the repository"
fi
exit "$status"
