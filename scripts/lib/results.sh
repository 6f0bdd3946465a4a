# Where the benchmark scripts write their results, and the provenance every result file carries.
# Source it from the repository root: `source scripts/lib/results.sh`.
#
# A run writes a new folder, bench/results/<UTC date>-<short revision>[-dirty], and never
# overwrites an older result: a script refuses to start when the folder exists (set RESULT_DIR to
# write elsewhere), and a script handed a folder by its caller (bench-report.sh runs
# bench-live.sh into its own folder) refuses to overwrite a file that is already there.

# The revision the results come from: the commit, plus "-dirty" when tracked sources differ
# from it (results and the ignored build folders do not count).
results_revision() {
  local rev
  rev=$(git rev-parse --short=10 HEAD 2>/dev/null || echo unknown)
  if ! git diff --quiet HEAD -- . ':(exclude)bench/results' 2>/dev/null; then
    rev+=-dirty
  fi
  echo "$rev"
}

# new_results_dir [DIR]: creates and prints DIR, by default bench/results/<UTC date>-<revision>.
# Fails when DIR already exists.
new_results_dir() {
  local dir=${1:-bench/results/$(date -u +%F)-$(results_revision)}
  if [ -e "$dir" ]; then
    echo "results: $dir already exists; results are never overwritten (remove it, or set RESULT_DIR)" >&2
    return 1
  fi
  mkdir -p "$dir"
  echo "$dir"
}

# refuse_overwrite FILE...: fails when any FILE exists.
refuse_overwrite() {
  local f
  for f in "$@"; do
    if [ -e "$f" ]; then
      echo "results: $f already exists; results are never overwritten" >&2
      return 1
    fi
  done
}

# use_results_dir FILE...: sets RESULT_DIR for a script that writes FILE... there: the caller's
# RESULT_DIR (created if needed; fails when any FILE is already in it), else a new folder.
use_results_dir() {
  if [ -n "${RESULT_DIR:-}" ]; then
    mkdir -p "$RESULT_DIR"
    local f
    for f in "$@"; do
      refuse_overwrite "$RESULT_DIR/$f" || return 1
    done
  else
    RESULT_DIR=$(new_results_dir) || return 1
  fi
}

# provenance COMMAND...: Markdown lines that say which revision, command and machine produced a
# result file. Put them right under the file's title.
provenance() {
  local cpu mem
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ *//')
  mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null)
  echo "- Revision: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . ':(exclude)bench/results' 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "- Command: \`$*\`"
  echo "- Machine: $(nproc) × ${cpu:-unknown CPU}, ${mem:-unknown memory}, $(uname -sr); load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
  echo "- Date: $(date -u '+%F %H:%M') UTC"
}
