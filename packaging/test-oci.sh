#!/usr/bin/env bash
# make test-oci: an OCI image without a container daemon. A bookworm root with the package
# installed (packaging/rootfs.sh, mmdebstrap) becomes the single layer of an OCI layout (umoci),
# with cgn-router as its entrypoint; the layout is written as DIST_DIR/cognitora-<v>-oci.tar. The
# check unpacks the image again (umoci unpack) and runs the binaries inside it with chroot.
#   packaging/test-oci.sh DIST_DIR
set -euo pipefail
dist="$(realpath "${1:?usage: test-oci.sh DIST_DIR}")"
deb="$(ls "$dist"/cognitora_*_amd64.deb | tail -1)"
version="$(dpkg-deb -f "$deb" Version)"
command -v umoci >/dev/null || { echo "test-oci: umoci missing (scripts/bootstrap.sh --package)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

"$(dirname "$0")/rootfs.sh" "$deb" "$work/fs"

layout="$work/oci"
image="$layout:$version"
umoci init --layout "$layout"
umoci new --image "$image"
umoci unpack --image "$image" "$work/bundle"
cp -a "$work/fs/." "$work/bundle/rootfs/"
umoci repack --image "$image" "$work/bundle"
umoci config --image "$image" --config.user cognitora --config.workingdir /var/lib/cognitora \
  --config.entrypoint /usr/bin/cgn-router --config.cmd=--config --config.cmd=/etc/cognitora/router.toml \
  --config.exposedports 8080/tcp --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.title=cognitora"
umoci gc --layout "$layout"
echo "ok: OCI layout $(du -sh "$layout" | cut -f1), image cognitora:$version"

umoci unpack --image "$image" "$work/check"
rootfs="$work/check/rootfs"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["process"]["args"][0] == "/usr/bin/cgn-router"' "$work/check/config.json"
for exe in "$rootfs"/usr/bin/cgn-*; do
  got="$(chroot "$rootfs" "/usr/bin/$(basename "$exe")" --version)"
  [[ "$got" == "$(basename "$exe") $version" ]] || { echo "FAIL: $got" >&2; exit 1; }
  echo "ok (in the image): $got"
done
chroot --userspec=cognitora:cognitora "$rootfs" /usr/bin/cgn-agent --config /etc/cognitora/agent.toml --print-command
echo "ok (in the image, as cognitora): cgn-agent reads /etc/cognitora/agent.toml"

tar -C "$layout" -cf "$dist/cognitora-$version-oci.tar" .
(cd "$dist" && sha256sum "cognitora-$version-oci.tar" >"cognitora-$version-oci.tar.sha256")
echo "test-oci: ok in $(( $(date +%s) - start )) s: $dist/cognitora-$version-oci.tar"
