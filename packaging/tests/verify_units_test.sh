#!/usr/bin/env bash
# The unit check (packaging/verify-units.sh) passes on packaging/systemd/ with the built binaries
# and fails on a unit with a misspelt value, an unknown key, or a missing binary.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="${1:?usage: verify_units_test.sh BIN_DIR}"

"$here/verify-units.sh" "$bin_dir"

bad="$(mktemp -d)"
trap 'rm -rf "$bad"' EXIT
expect_failure() {  # NAME SED-EXPRESSION
  cp "$here/systemd/cgn-router.service" "$bad/cgn-router.service"
  sed -i "$2" "$bad/cgn-router.service"
  if "$here/verify-units.sh" "$bin_dir" "$bad" 2>"$bad/err" >/dev/null; then
    echo "FAIL: verify-units accepted a unit with $1" >&2
    exit 1
  fi
  echo "ok: rejected $1: $(head -2 "$bad/err" | tail -1)"
}
expect_failure "a misspelt Restart=" 's/^Restart=on-failure/Restart=on-falure/'
expect_failure "an unknown key" 's/^\[Service\]/[Service]\nRestartSecs=2/'
expect_failure "a missing binary" 's#/usr/bin/cgn-router#/usr/bin/cgn-routr#'
echo "verify_units_test: ok"
