#!/usr/bin/env bash
# A fresh Debian bookworm root filesystem in DIR (mmdebstrap, minbase, from the Debian mirror) with
# the package DEB installed by apt, which fetches its Depends from the mirror as on a new machine.
# make test-package and make test-oci start from it.
#   packaging/rootfs.sh DEB DIR        (CGN_DEBIAN_MIRROR: default http://deb.debian.org/debian)
set -euo pipefail
deb="$(realpath "${1:?usage: rootfs.sh DEB DIR}")"
dir="${2:?usage: rootfs.sh DEB DIR}"
mirror="${CGN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
command -v mmdebstrap >/dev/null || { echo "rootfs: mmdebstrap missing (scripts/bootstrap.sh --package)" >&2; exit 2; }
mkdir -p "$dir"
echo "rootfs: bookworm minbase from $mirror into $dir, then apt-get install $(basename "$deb")"
mmdebstrap --variant=minbase --mode=auto --skip=check/empty \
  --customize-hook="copy-in '$deb' /tmp" \
  --customize-hook="chroot \"\$1\" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /tmp/$(basename "$deb")" \
  --customize-hook="rm -f \"\$1/tmp/$(basename "$deb")\"" \
  --customize-hook="chroot \"\$1\" apt-get clean" \
  bookworm "$dir" "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
  "deb http://security.debian.org/debian-security bookworm-security main"
