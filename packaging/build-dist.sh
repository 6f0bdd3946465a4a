#!/usr/bin/env bash
# make dist: the release artifacts from an already-built tree, in OUT_DIR:
#   cognitora-<v>-linux-amd64.tar.gz   the install tree (usr/bin, usr/lib/cognitora, lib/systemd/system, etc/cognitora,
#                                      usr/share/cognitora/dashboard, usr/share/doc/cognitora)
#   cognitora_<v>_amd64.deb            the same tree as a Debian package (dpkg-deb)
#   <artifact>.sha256                  `sha256sum` lines, what scripts/install.sh verifies
# Binaries are linked dynamically against bookworm's libraries; the package's Depends come from
# dpkg-shlibdeps on the staged binaries (docs/operations/packaging.md). The version is what the
# binaries report (`cgn-router --version`, CMake's project version).
#   packaging/build-dist.sh BIN_DIR OUT_DIR
# CGN_DEB_COMPRESSION=gzip: a faster, larger package (the ctest check uses it; releases use xz).
set -euo pipefail

bin_dir="$(cd "${1:?usage: build-dist.sh BIN_DIR OUT_DIR}" && pwd)"
out_dir="${2:?usage: build-dist.sh BIN_DIR OUT_DIR}"
src="$(cd "$(dirname "$0")/.." && pwd)"
pkg="$src/packaging"
mkdir -p "$out_dir"
out_dir="$(cd "$out_dir" && pwd)"

binaries=(cgn-router cgn-agent cgn-kvcached cgn-power cgn-engine-sim cgn-gossip cgn-digest)
[[ -x "$bin_dir/cgn-ctl" ]] && binaries+=(cgn-ctl)
for b in "${binaries[@]}"; do
  [[ -x "$bin_dir/$b" ]] || { echo "build-dist: $bin_dir/$b is missing (build it first)" >&2; exit 2; }
done
# cgn-engine-sim's gRPC client of cgn-kvcached, loaded for --kvcached-target from ../lib/cognitora.
modules=(libcgn_sim_kvcached.so)
for m in "${modules[@]}"; do
  [[ -f "$bin_dir/$m" ]] || { echo "build-dist: $bin_dir/$m is missing (build cgn-engine-sim first)" >&2; exit 2; }
done
version="$("$bin_dir/cgn-router" --version | awk '{print $2}')"
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || { echo "build-dist: bad version '$version'" >&2; exit 2; }
# Reproducible timestamps: the last commit's time when in a checkout.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct 2>/dev/null || date +%s)}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/debian/cognitora"  # dpkg-shlibdeps wants the binaries in their package's folder
install -d -m 755 "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/cognitora" \
  "$root/usr/share/cognitora/dashboard" "$root/usr/share/doc/cognitora" "$root/usr/share/lintian/overrides"
for b in "${binaries[@]}"; do
  install -m 755 "$bin_dir/$b" "$root/usr/bin/$b"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/$b"
done
install -d -m 755 "$root/usr/lib/cognitora"
for m in "${modules[@]}"; do
  install -m 644 "$bin_dir/$m" "$root/usr/lib/cognitora/$m"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/lib/cognitora/$m"
done
install -m 644 "$pkg"/systemd/*.service "$root/lib/systemd/system/"
install -m 644 "$pkg"/etc/cognitora/*.toml "$root/etc/cognitora/"
for f in index.html dashboard.css dashboard.js prom.js metric_names.txt; do
  install -m 644 "$src/dashboard/$f" "$root/usr/share/cognitora/dashboard/$f"
done
doc="$root/usr/share/doc/cognitora"
install -m 644 "$src/README.md" "$doc/README.md"
(cd "$src/docs" && find . -type f -name '*.md' -o -type f -name '*.toml') | while read -r f; do
  install -D -m 644 "$src/docs/$f" "$doc/$f"
done
install -m 644 "$pkg/debian/copyright" "$doc/copyright"
changelog_date="$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
printf 'cognitora (%s) bookworm; urgency=medium\n\n  * Release %s.\n\n -- Cognitora developers <cognitora@packages.invalid>  %s\n' \
  "$version" "$version" "$changelog_date" | gzip -9n >"$doc/changelog.gz"
install -m 644 "$pkg/lintian-overrides" "$root/usr/share/lintian/overrides/cognitora"

# The tarball: the install tree, before the package metadata goes in.
tarball="cognitora-$version-linux-amd64.tar.gz"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  -C "$root" --transform "s,^\.,cognitora-$version," -czf "$out_dir/$tarball" .

install -d -m 755 "$root/DEBIAN"
printf 'Source: cognitora\n\nPackage: cognitora\nArchitecture: amd64\n' >"$work/debian/control"
shlibs="$(cd "$work" && dpkg-shlibdeps -O "$root/usr/bin/"* "$root/usr/lib/cognitora/"* | sed -n 's/^shlibs:Depends=//p')"
[[ -n "$shlibs" ]] || { echo "build-dist: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
sed -e "s/@VERSION@/$version/" -e "s/@SIZE@/$size/" -e "s/@SHLIBS@/$shlibs/" "$pkg/debian/control.in" \
  >"$root/DEBIAN/control"
install -m 644 "$pkg/debian/conffiles" "$root/DEBIAN/conffiles"
install -m 755 "$pkg/debian/postinst" "$pkg/debian/prerm" "$pkg/debian/postrm" "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's,^\./,,' | sort |
  xargs md5sum >DEBIAN/md5sums)
chmod 644 "$root/DEBIAN/md5sums"
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
deb="cognitora_${version}_amd64.deb"
dpkg-deb --root-owner-group -Z"${CGN_DEB_COMPRESSION:-xz}" --build "$root" "$out_dir/$deb" >/dev/null

(cd "$out_dir" && sha256sum "$tarball" >"$tarball.sha256" && sha256sum "$deb" >"$deb.sha256")
echo "build-dist: $out_dir/$tarball"
echo "build-dist: $out_dir/$deb (Depends: adduser, $shlibs)"
