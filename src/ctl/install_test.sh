#!/usr/bin/env bash
# `cgn-ctl install` and `uninstall` in temporary roots only (never the host's /etc):
#   dry run writes nothing and prints paths and contents; --apply writes the units and configuration
#   of packaging/ and the same enable symlinks `systemctl --root enable` makes; the result passes
#   `systemd-analyze verify --root`; a second --apply changes nothing; uninstall leaves the root
#   byte for byte as before; a file an operator changed or wrote is kept by install and uninstall;
#   an unknown role is a usage error (exit 2). The power role runs when packaging/ has its unit,
#   otherwise it must be refused with a clear error.
#   src/ctl/install_test.sh BIN_DIR
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
bin_dir="$(cd "${1:?usage: install_test.sh BIN_DIR}" && pwd)"
ctl="$bin_dir/cgn-ctl"
for t in systemctl systemd-analyze; do
  command -v "$t" >/dev/null || { echo "install_test: $t not found" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A root as a bookworm host has it before install: systemd's own units (the targets ours name),
# Debian's etcd.service, and the binaries the units start.
make_root() {
  mkdir -p "$1/lib/systemd/system" "$1/etc/systemd/system" "$1/usr/bin" "$1/bin"
  cp -a /lib/systemd/system/. "$1/lib/systemd/system/"
  [[ -f "$1/lib/systemd/system/etcd.service" ]] || cp "$src/src/ctl/testdata/etcd.service" "$1/lib/systemd/system/"
  for b in cgn-router cgn-agent cgn-kvcached cgn-power; do
    [[ -x "$bin_dir/$b" ]] && cp "$bin_dir/$b" "$1/usr/bin/$b"
  done
  printf '#!/bin/sh\n' >"$1/usr/bin/etcd"
  chmod 755 "$1/usr/bin/etcd"
  cp /bin/kill "$1/bin/kill"
}
# Every path with its type, mode and link target, and every file's checksum.
listing() {
  (cd "$1" && find . -printf '%y %m %p -> %l\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum)
}

roles=(router agent kvcached etcd)
if [[ -f "$src/packaging/systemd/cgn-power.service" ]]; then
  roles+=(power)
else
  out="$("$ctl" install power --root "$work" 2>&1)" && fail "power role accepted without its unit"
  [[ "$out" == *"without packaging/systemd/cgn-power.service"* ]] || fail "power refusal unclear: $out"
  echo "ok: power role refused until packaging/systemd/cgn-power.service exists"
fi

root="$work/root"
make_root "$root"
before="$(listing "$root")"

# Dry run: paths and contents, nothing written.
dry="$("$ctl" install "${roles[@]}" --root "$root")"
[[ "$dry" == *"would write /etc/systemd/system/cgn-router.service:"* ]] || fail "dry run lacks the router unit: $dry"
grep -qx 'ExecStart=/usr/bin/cgn-agent --config /etc/cognitora/agent.toml' <<<"$dry" || fail "dry run lacks the agent unit's contents"
[[ "$dry" == *"would write /etc/cognitora/kvcached.toml:"* ]] || fail "dry run lacks kvcached.toml"
[[ "$dry" == *"would write /etc/systemd/system/etcd.service.d/cognitora.conf:"* ]] || fail "dry run lacks the etcd drop-in"
[[ "$dry" == *"would link /etc/systemd/system/multi-user.target.wants/cgn-router.service -> /etc/systemd/system/cgn-router.service"* ]] ||
  fail "dry run lacks the enable link"
[[ "$(listing "$root")" == "$before" ]] || fail "the dry run changed the root"
echo "ok: dry run prints paths and contents and writes nothing"

# Apply: the packaged files, byte for byte.
"$ctl" install "${roles[@]}" --root "$root" --apply >"$work/apply.out"
for u in cgn-router cgn-agent cgn-kvcached; do
  cmp "$src/packaging/systemd/$u.service" "$root/etc/systemd/system/$u.service"
  cmp "$src/packaging/etc/cognitora/${u#cgn-}.toml" "$root/etc/cognitora/${u#cgn-}.toml"
done
cmp "$src/packaging/systemd/etcd.service.d/cognitora.conf" "$root/etc/systemd/system/etcd.service.d/cognitora.conf"
cmp "$src/packaging/etc/cognitora/etcd.env" "$root/etc/cognitora/etcd.env"
[[ -f "$root/var/lib/cognitora/cgn-ctl-install.json" ]] || fail "no manifest"
echo "ok: --apply wrote the packaged units and configuration"

# The enable symlinks are the ones systemctl itself makes for the same unit files.
ref="$work/ref"
make_root "$ref"
(cd "$root" && find etc -type f ! -path 'etc/cognitora/*' -print0 | xargs -0 -I{} cp --parents {} "$ref/")
units=(cgn-router.service cgn-agent.service cgn-kvcached.service etcd.service)
[[ " ${roles[*]} " == *" power "* ]] && units+=(cgn-power.service)
systemctl --root="$ref" enable "${units[@]}" >/dev/null 2>&1
links() { (cd "$1" && find etc -type l -printf '%p -> %l\n' | sort); }
[[ -n "$(links "$ref")" ]] || fail "systemctl made no links"
diff <(links "$ref") <(links "$root") || fail "install's links differ from systemctl --root enable's"
echo "ok: the enable links equal systemctl --root enable's ($(links "$root" | wc -l) links)"

# systemd-analyze verify on the result: any output is a failure (it warns and exits 0).
for u in "${units[@]}"; do
  path="$root/etc/systemd/system/$u"
  [[ -f "$path" ]] || path="$root/lib/systemd/system/$u"
  out="$(systemd-analyze verify --man=no --root="$root" "$path" 2>&1)" || true
  [[ -z "$out" ]] || fail "systemd-analyze verify $u: $out"
done
echo "ok: systemd-analyze verify --root passes on ${units[*]}"

# Again: nothing changes.
applied="$(listing "$root")"
"$ctl" install "${roles[@]}" --root "$root" --apply >"$work/again.out"
[[ "$(listing "$root")" == "$applied" ]] || fail "a second --apply changed the root"
grep -q '^unchanged /etc/cognitora/router.toml' "$work/again.out" || fail "second apply: $(cat "$work/again.out")"
echo "ok: a second --apply changes nothing"

# Uninstall: dry run first, then the root exactly as before.
"$ctl" uninstall --root "$root" | grep -q '^would remove /etc/cognitora/router.toml' || fail "uninstall dry run"
[[ "$(listing "$root")" == "$applied" ]] || fail "the uninstall dry run changed the root"
"$ctl" uninstall --root "$root" --apply >"$work/un.out"
diff <(echo "$before") <(listing "$root") || fail "uninstall did not leave the root as before"
out="$("$ctl" uninstall --root "$root" --apply)"
[[ "$out" == *"nothing to do"* ]] || fail "uninstall without a manifest: $out"
echo "ok: uninstall leaves the root as it was before install"

# Operators' files: one written before install (kept, never overwritten), one edited after it
# (kept by a re-install and by uninstall); everything else goes.
mkdir -p "$root/etc/cognitora"
printf '# the operator'"'"'s agent\n[engine]\nkind = "sim"\n' >"$root/etc/cognitora/agent.toml"
operator_agent="$(sha256sum <"$root/etc/cognitora/agent.toml")"
"$ctl" install router agent --root "$root" --apply >"$work/op.out"
grep -q '^kept /etc/cognitora/agent.toml: not written by cgn-ctl install' "$work/op.out" || fail "agent.toml: $(cat "$work/op.out")"
echo '# edited by the operator' >>"$root/etc/cognitora/router.toml"
operator_router="$(sha256sum <"$root/etc/cognitora/router.toml")"
"$ctl" install router agent --root "$root" --apply >"$work/op2.out"
grep -q '^kept /etc/cognitora/router.toml: changed since cgn-ctl install wrote it' "$work/op2.out" ||
  fail "router.toml: $(cat "$work/op2.out")"
"$ctl" uninstall --root "$root" --apply >"$work/op-un.out"
grep -q '^kept /etc/cognitora/router.toml' "$work/op-un.out" || fail "uninstall: $(cat "$work/op-un.out")"
[[ "$(sha256sum <"$root/etc/cognitora/agent.toml")" == "$operator_agent" ]] || fail "agent.toml was changed"
[[ "$(sha256sum <"$root/etc/cognitora/router.toml")" == "$operator_router" ]] || fail "router.toml was changed"
rm -r "$root/etc/cognitora"
diff <(echo "$before") <(listing "$root") || fail "uninstall left more than the operator's files"
echo "ok: operators' files are kept by install and uninstall"

# Usage errors.
set +e
"$ctl" install routr --root "$root" >/dev/null 2>"$work/err"
rc=$?
set -e
[[ $rc == 2 ]] || fail "unknown role: exit $rc, want 2"
grep -q 'routr not in' "$work/err" || fail "unknown role not named: $(cat "$work/err")"
echo "ok: an unknown role is a usage error (exit 2)"
echo "install_test: ok"
