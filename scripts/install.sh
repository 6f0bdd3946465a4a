#!/bin/sh
# Installs a Cognitora release from its tarball (make dist), for machines without the .deb:
#   CGN_VERSION=0.1.0 sh install.sh --from https://example.org/releases/0.1.0
#   CGN_VERSION=0.1.0 sh install.sh --from ./out/dist --root /tmp/rack-root
# --from: a folder or a URL (http, https, file) holding cognitora-<v>-linux-amd64.tar.gz and its
# .sha256; default $CGN_RELEASE_URL. --root: install under this folder instead of / (as
# `systemctl --root` does; tests use it). The checksum is verified before anything is written.
# Idempotent: files already identical are left alone and reported as such; a changed file in
# /etc/cognitora is kept, the release's copy written beside it as <name>.dist. Prints each step.
# The cognitora user and `systemctl daemon-reload` only when installing into / as root. Units are
# not enabled: `systemctl enable --now cgn-<role>` for the roles the node runs.
set -eu

usage() { echo "usage: CGN_VERSION=V install.sh [--from DIR|URL] [--root DIR]" >&2; exit 2; }
from="${CGN_RELEASE_URL:-}"
root="/"
while [ $# -gt 0 ]; do
  case "$1" in
    --from) [ $# -ge 2 ] || usage; from="$2"; shift 2 ;;
    --root) [ $# -ge 2 ] || usage; root="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; usage ;;
  esac
done
version="${CGN_VERSION:-}"
[ -n "$version" ] || { echo "install.sh: set CGN_VERSION (e.g. CGN_VERSION=0.1.0)" >&2; exit 2; }
[ -n "$from" ] || { echo "install.sh: give --from DIR|URL (or CGN_RELEASE_URL)" >&2; exit 2; }
case "$version" in *[!0-9A-Za-z.+~-]*) echo "install.sh: bad CGN_VERSION '$version'" >&2; exit 2 ;; esac

tarball="cognitora-$version-linux-amd64.tar.gz"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fetch() {  # NAME: from --from into $work
  case "$from" in
    http://*|https://*|file://*)
      echo "install.sh: fetching ${from%/}/$1"
      curl -fsSL --retry 3 -o "$work/$1" "${from%/}/$1" || { echo "install.sh: cannot fetch ${from%/}/$1" >&2; exit 1; } ;;
    *)
      [ -f "$from/$1" ] || { echo "install.sh: $from/$1 not found" >&2; exit 1; }
      echo "install.sh: using $from/$1"
      cp "$from/$1" "$work/$1" ;;
  esac
}
fetch "$tarball"
fetch "$tarball.sha256"
want="$(awk '{print $1; exit}' "$work/$tarball.sha256")"
got="$(sha256sum "$work/$tarball" | awk '{print $1}')"
if [ "$want" != "$got" ]; then
  echo "install.sh: checksum mismatch for $tarball: expected $want, got $got; nothing installed" >&2
  exit 1
fi
echo "install.sh: sha256 ok ($got)"
tar -xzf "$work/$tarball" -C "$work"
tree="$work/cognitora-$version"
[ -d "$tree/usr/bin" ] || { echo "install.sh: $tarball has no cognitora-$version/usr/bin" >&2; exit 1; }

root="${root%/}"
installed=0; unchanged=0; kept=0
for rel in $(cd "$tree" && find . -type f | sed 's,^\./,,' | sort); do
  dst="$root/$rel"
  if [ -f "$dst" ] && cmp -s "$tree/$rel" "$dst"; then
    unchanged=$((unchanged + 1))
    continue
  fi
  mode=644
  case "$rel" in usr/bin/*) mode=755 ;; esac
  case "$rel" in
    etc/*)
      if [ -f "$dst" ]; then
        install -D -m "$mode" "$tree/$rel" "$dst.dist"
        echo "install.sh: kept /$rel (locally changed); the release's copy is /$rel.dist"
        kept=$((kept + 1))
        continue
      fi ;;
  esac
  install -D -m "$mode" "$tree/$rel" "$dst"
  echo "install.sh: installed /$rel"
  installed=$((installed + 1))
done
install -d "$root/usr/share/cognitora"
echo "$version" >"$root/usr/share/cognitora/VERSION"

if [ -z "$root" ] && [ "$(id -u)" = 0 ]; then
  if ! getent passwd cognitora >/dev/null; then
    echo "install.sh: adding the system user cognitora (home /var/lib/cognitora)"
    useradd --system --user-group --home-dir /var/lib/cognitora --create-home --shell /usr/sbin/nologin cognitora
  fi
  if [ -d /run/systemd/system ]; then
    echo "install.sh: systemctl daemon-reload"
    systemctl daemon-reload
  fi
else
  echo "install.sh: root ${root:-/}: no user created, systemd not told (not the live system)"
fi
echo "install.sh: cognitora $version: $installed installed, $unchanged already up to date, $kept kept; next: systemctl enable --now cgn-<role>"
