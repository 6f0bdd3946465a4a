#!/usr/bin/env bash
# Proves that the checkout stands alone: runs the already-built quick test labels in a private
# mount namespace in which the checkout's parent folder is an empty tmpfs, so nothing beside the
# checkout (a folder beside it, another clone) can be read. The checkout itself is bind-mounted
# back at the same path, so the build's absolute paths still work; nothing is rebuilt.
#
# Usage: scripts/test-standalone.sh [BUILD_DIR] [LABEL_REGEX]   (defaults: build, ^unit$)
# Needs root (or CAP_SYS_ADMIN) for unshare -m; CI runs as root.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd -P)
build=${1:-build}
labels=${2:-'^unit$'}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
build=$(cd "$build" && pwd -P)
parent=$(dirname "$root")

if [ "$parent" = / ]; then
  echo "test-standalone: the checkout $root sits directly under /; clone it one folder deeper" >&2
  exit 2
fi
case "$build/" in
  "$root"/*) ;;
  "$parent"/*)
    echo "test-standalone: build folder $build is beside the checkout and would be hidden" >&2
    exit 2
    ;;
esac
if [ ! -f "$build/CTestTestfile.cmake" ]; then
  echo "test-standalone: $build is not a configured build folder (run make build first)" >&2
  exit 2
fi
# A place for the bind mount that the tmpfs will not cover.
stash=
for d in /run /dev/shm /tmp /mnt; do
  case "$d/" in "$parent"/*) continue ;; esac
  if [ -d "$d" ] && [ -w "$d" ]; then
    stash=$(mktemp -d "$d/cgn-standalone.XXXXXX")
    break
  fi
done
if [ -z "$stash" ]; then
  echo "test-standalone: no writable folder outside $parent for the bind mount" >&2
  exit 2
fi
trap 'rmdir "$stash" 2>/dev/null || true' EXIT

unshare -m --propagation private bash -euo pipefail -c '
  root=$1 parent=$2 build=$3 labels=$4 stash=$5
  mount --bind "$root" "$stash"
  mount -t tmpfs -o size=1m,mode=0755 cgn-standalone "$parent"
  mkdir -p "$root"
  mount --move "$stash" "$root"
  beside=$(ls -A "$parent")
  if [ "$beside" != "$(basename "$root")" ]; then
    echo "test-standalone: $parent still shows: $beside" >&2
    exit 1
  fi
  echo "test-standalone: $parent now holds only $(basename "$root"); running ctest -L \"$labels\""
  cd "$root"
  ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -L "$labels" --timeout 900
' bash "$root" "$parent" "$build" "$labels" "$stash"
