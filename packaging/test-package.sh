#!/usr/bin/env bash
# make test-package: the .deb from make dist installed with apt into a fresh bookworm root
# (packaging/rootfs.sh, mmdebstrap; needs the Debian mirror), then checked inside it with chroot:
# dpkg says installed, the cognitora user exists, units and conffiles are in place, every binary
# runs (--version), and the installed router starts, serves its dashboard and stops on SIGTERM.
#   packaging/test-package.sh DIST_DIR
set -euo pipefail
dist="$(realpath "${1:?usage: test-package.sh DIST_DIR}")"
deb="$(ls "$dist"/cognitora_*_amd64.deb | tail -1)"
version="$(dpkg-deb -f "$deb" Version)"
root="$(mktemp -d)"
# Removed only once /proc is unmounted from it.
trap 'umount "$root/fs/proc" 2>/dev/null || true; mountpoint -q "$root/fs/proc" || rm -rf "$root"' EXIT
start=$(date +%s)

"$(dirname "$0")/rootfs.sh" "$deb" "$root/fs"
fs="$root/fs"
inside() { chroot "$fs" "$@"; }

[[ "$(inside dpkg-query -W -f '${Status} ${Version}' cognitora)" == "install ok installed $version" ]]
echo "ok: dpkg: cognitora $version installed"
inside getent passwd cognitora >/dev/null && echo "ok: user cognitora"
for f in /lib/systemd/system/cgn-router.service /lib/systemd/system/cgn-agent.service \
  /lib/systemd/system/cgn-kvcached.service /lib/systemd/system/cgn-power.service \
  /etc/cognitora/router.toml /etc/cognitora/agent.toml /etc/cognitora/kvcached.toml /etc/cognitora/power.toml \
  /usr/share/cognitora/dashboard/index.html; do
  [[ -f "$fs$f" ]] || { echo "FAIL: $f missing" >&2; exit 1; }
done
echo "ok: units, /etc/cognitora, dashboard"
for exe in "$fs"/usr/bin/cgn-*; do
  inside "/usr/bin/$(basename "$exe")" --version
done

# /proc as on a booted system: the router finds its dashboard beside /proc/self/exe.
mount -t proc proc "$fs/proc"
port_file=/tmp/router.port
chroot "$fs" /usr/bin/cgn-router --listen 127.0.0.1:0 --port-file "$port_file" --node http://127.0.0.1:9 \
  >"$root/router.log" 2>&1 &
pid=$!
for _ in $(seq 300); do [[ -s "$fs$port_file" ]] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
page="$(curl -sf "http://127.0.0.1:$(cat "$fs$port_file" 2>/dev/null || echo 1)/dashboard/" || true)"
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || { echo "FAIL: installed router exited $?" >&2; cat "$root/router.log" >&2; exit 1; }
[[ "$page" == *"<html"* ]] || { echo "FAIL: no dashboard" >&2; cat "$root/router.log" >&2; exit 1; }
echo "ok: the installed cgn-router ran in the fresh root, served /dashboard/ and stopped cleanly"
umount "$fs/proc"
echo "test-package: ok in $(( $(date +%s) - start )) s (root: $(du -sh "$fs" | cut -f1))"
