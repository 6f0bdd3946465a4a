#!/usr/bin/env bash
# make dist's artifacts, built from the binaries of this build tree (no recompilation):
#   - both checksums verify (sha256sum -c);
#   - `apt-get install --simulate ./cognitora_<v>_amd64.deb` resolves every Depends on this system;
#   - `dpkg-deb -x` into a temporary folder: every binary runs from there (--version names the
#     package's version, --help exits 0), and the router finds the packaged dashboard beside itself;
#   - the tarball holds the same files as the package;
#   - scripts/install.sh installs the tarball into a temporary root, idempotently, keeping a local
#     /etc edit, and refuses a bad checksum;
#   - lintian reports no error or warning (packaging/lintian-overrides is the allow-list).
#   packaging/tests/package_test.sh BIN_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="${1:?usage: package_test.sh BIN_DIR}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

CGN_DEB_COMPRESSION=gzip "$here/build-dist.sh" "$bin_dir" "$tmp/dist"
cd "$tmp/dist"
deb="$(ls cognitora_*_amd64.deb)"
tarball="$(ls cognitora-*-linux-amd64.tar.gz)"
version="${deb#cognitora_}"
version="${version%_amd64.deb}"
sha256sum -c "$deb.sha256" "$tarball.sha256"

apt-get install --simulate "./$deb" >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log" >&2; exit 1; }
grep -q "^Inst cognitora ($version " "$tmp/apt.log" || { cat "$tmp/apt.log" >&2; exit 1; }
echo "ok: apt-get install --simulate ./$deb resolves"

dpkg-deb -x "$deb" "$tmp/x"
for exe in "$tmp"/x/usr/bin/*; do
  name="$(basename "$exe")"
  got="$("$exe" --version)"
  [[ "$got" == "$name $version" ]] || { echo "FAIL: $name --version: '$got'" >&2; exit 1; }
  "$exe" --help >/dev/null || { echo "FAIL: $name --help exited $?" >&2; exit 1; }
  echo "ok: $got, --help"
done
# cgn-engine-sim's gRPC client module, where the simulator looks for it (../lib/cognitora).
nm -D --defined-only "$tmp/x/usr/lib/cognitora/libcgn_sim_kvcached.so" | grep -q " cgn_sim_kvcached_connect$" ||
  { echo "FAIL: usr/lib/cognitora/libcgn_sim_kvcached.so is missing or has no entry point" >&2; exit 1; }
echo "ok: usr/lib/cognitora/libcgn_sim_kvcached.so"
for unit in cgn-router cgn-agent cgn-kvcached cgn-power; do
  [[ -f "$tmp/x/lib/systemd/system/$unit.service" ]] || { echo "FAIL: no $unit.service" >&2; exit 1; }
done
dpkg-deb -f "$deb" Depends | grep -q "libsystemd0" || { echo "FAIL: Depends lacks libsystemd0" >&2; exit 1; }

# The extracted router serves the packaged dashboard (<exe>/../share/cognitora/dashboard).
"$tmp/x/usr/bin/cgn-router" --listen 127.0.0.1:0 --port-file "$tmp/port" --node http://127.0.0.1:9 \
  >"$tmp/router.log" 2>&1 &
pid=$!
for _ in $(seq 300); do [[ -s "$tmp/port" ]] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
page="$(curl -sf "http://127.0.0.1:$(cat "$tmp/port" 2>/dev/null || echo 1)/dashboard/" || true)"
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || true
[[ "$page" == *"<html"* ]] || { echo "FAIL: packaged router did not serve its dashboard" >&2; cat "$tmp/router.log" >&2; exit 1; }
echo "ok: the extracted cgn-router serves the packaged dashboard"

(cd "$tmp/x" && find . -type f | sed 's,^\./,,' | sort) >"$tmp/deb.files"
tar -tzf "$tarball" | grep -v '/$' | sed "s,^cognitora-$version/,," | sort >"$tmp/tar.files"
diff -u "$tmp/deb.files" "$tmp/tar.files" || { echo "FAIL: tarball and package differ" >&2; exit 1; }
echo "ok: the tarball holds the package's $(wc -l <"$tmp/tar.files") files"

# scripts/install.sh from the tarball into temporary roots (never the host's /).
install_sh="$here/../scripts/install.sh"
r="$tmp/root1"
CGN_VERSION="$version" "$install_sh" --from "$tmp/dist" --root "$r" >"$tmp/i1.log"
grep -q "installed /usr/bin/cgn-router" "$tmp/i1.log" && [[ -x "$r/usr/bin/cgn-router" ]] &&
  [[ "$(cat "$r/usr/share/cognitora/VERSION")" == "$version" ]] || { cat "$tmp/i1.log" >&2; exit 1; }
CGN_VERSION="$version" "$install_sh" --from "$tmp/dist" --root "$r" >"$tmp/i2.log"
grep -q ": 0 installed, [1-9][0-9]* already up to date, 0 kept" "$tmp/i2.log" || { cat "$tmp/i2.log" >&2; exit 1; }
echo "local edit" >>"$r/etc/cognitora/router.toml"
CGN_VERSION="$version" "$install_sh" --from "file://$tmp/dist" --root "$r" >"$tmp/i3.log"
grep -q "kept /etc/cognitora/router.toml" "$tmp/i3.log" && grep -q "local edit" "$r/etc/cognitora/router.toml" &&
  cmp -s "$r/etc/cognitora/router.toml.dist" "$tmp/x/etc/cognitora/router.toml" || { cat "$tmp/i3.log" >&2; exit 1; }
mkdir "$tmp/bad"
cp "$tmp/dist/$tarball" "$tmp/bad/"
echo "0000000000000000000000000000000000000000000000000000000000000000  $tarball" >"$tmp/bad/$tarball.sha256"
if CGN_VERSION="$version" "$install_sh" --from "$tmp/bad" --root "$tmp/root2" 2>"$tmp/i4.log"; then
  echo "FAIL: install.sh accepted a bad checksum" >&2; exit 1
fi
grep -q "checksum mismatch" "$tmp/i4.log" && [[ ! -e "$tmp/root2/usr" ]] || { cat "$tmp/i4.log" >&2; exit 1; }
echo "ok: install.sh installs into a root, is idempotent, keeps local /etc edits, refuses a bad checksum"

rc=0
lintian --fail-on error,warning --display-info "$deb" >"$tmp/lintian.log" 2>&1 || rc=$?
grep -v 'running with root privileges' "$tmp/lintian.log" || true
[[ "$rc" -eq 0 ]] || { echo "FAIL: lintian exited $rc" >&2; exit 1; }
echo "ok: lintian"
