#!/usr/bin/env bash
# `systemd-analyze verify` on every unit in packaging/systemd/, without a running systemd as PID 1:
# a temporary root holds a copy of the host's /lib/systemd/system (the targets our units name),
# our units, and the binaries at the paths the units' ExecStart name (/usr/bin/cgn-*, copied from
# BIN_DIR), and `systemd-analyze verify --root=ROOT` checks each unit there. verify exits 0 on
# unknown keys and bad values (it only warns), so any output at all is a failure.
#   packaging/verify-units.sh BIN_DIR [UNIT_DIR]
set -euo pipefail

bin_dir="${1:?usage: verify-units.sh BIN_DIR [UNIT_DIR]}"
unit_dir="${2:-$(cd "$(dirname "$0")" && pwd)/systemd}"
command -v systemd-analyze >/dev/null || { echo "verify-units: systemd-analyze not found" >&2; exit 2; }

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/lib/systemd/system" "$root/usr/bin" "$root/bin" "$root/etc"
cp -a /lib/systemd/system/. "$root/lib/systemd/system/"
cp /bin/kill "$root/bin/kill"
cp "$unit_dir"/*.service "$root/lib/systemd/system/"

status=0
for unit in "$unit_dir"/*.service; do
  name="$(basename "$unit")"
  for exe in $(sed -n 's/^Exec[A-Za-z]*=[-@+!]*\([^ ]*\).*/\1/p' "$unit"); do
    base="$(basename "$exe")"
    if [[ "$exe" == /usr/bin/cgn-* && -x "$bin_dir/$base" ]]; then
      cp "$bin_dir/$base" "$root$exe"
    fi
  done
  out="$(systemd-analyze verify --man=no --root="$root" "$root/lib/systemd/system/$name" 2>&1)" || true
  if [[ -n "$out" ]]; then
    echo "verify-units: $name:" >&2
    echo "$out" | sed 's/^/  /' >&2
    status=1
  else
    echo "verify-units: $name ok"
  fi
done
exit "$status"
