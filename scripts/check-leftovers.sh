#!/usr/bin/env bash
# The last step of `make test`: fails, listing them, when processes this run started are still
# alive (an engine that outlived its agent, a simulator or etcd a test did not stop). The Makefile
# puts a token, CGN_TEST_RUN, in the environment of everything it runs; a live process whose
# environment holds this run's token and that is not this script or one of its ancestors (make,
# its shells) is a leftover. Leftovers still there after a short grace are listed, then killed,
# so the next run starts clean. Reads /proc only: works as root (CI) and as a user.
set -euo pipefail

token="${CGN_TEST_RUN:-}"
if [[ -z "$token" ]]; then
  echo "check-leftovers: CGN_TEST_RUN is not set (run through make test)" >&2
  exit 2
fi
grace_s="${1:-10}"

ppid_of() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"  # the fields after "(comm)": state ppid ...
  read -r _ ppid _ <<<"$stat"
  echo "$ppid"
}

# This script's ancestors (they carry the token too); its own children (the $(...) below) are
# recognised by having this script as an ancestor.
declare -A mine=()
p=$$
while [[ -n "$p" && "$p" -gt 1 ]]; do
  mine[$p]=1
  p="$(ppid_of "$p")" || break
done

descends_from_me() {
  local p="$1"
  while [[ -n "$p" && "$p" -gt 1 ]]; do
    [[ "$p" == "$$" ]] && return 0
    p="$(ppid_of "$p")" || return 1
  done
  return 1
}

leftovers() {
  local d pid state
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    [[ -n "${mine[$pid]:-}" ]] && continue
    grep -qzxF "CGN_TEST_RUN=$token" "$d/environ" 2>/dev/null || continue
    state="$(cat "$d/stat" 2>/dev/null)" || continue
    state="${state##*) }"
    [[ "${state:0:1}" == "Z" ]] && continue  # a zombie holds nothing but its pid
    descends_from_me "$pid" && continue
    echo "$pid"
  done
}

deadline=$((SECONDS + grace_s))
left="$(leftovers)"
while [[ -n "$left" && $SECONDS -lt $deadline ]]; do
  sleep 1  # processes ending on their own (a parent-death signal in flight) get a moment
  left="$(leftovers)"
done
if [[ -z "$left" ]]; then
  echo "check-leftovers: no process of this test run is left"
  exit 0
fi
echo "check-leftovers: these processes started by this test run are still alive:" >&2
for pid in $left; do
  cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
  echo "  pid $pid: ${cmd:-?}" >&2
done
for pid in $left; do
  kill -KILL "$pid" 2>/dev/null || true
done
echo "check-leftovers: killed them; a test (or the product) leaves processes behind" >&2
exit 1
