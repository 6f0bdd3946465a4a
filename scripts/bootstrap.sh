#!/usr/bin/env bash
# Installs exactly the Debian packages Cognitora needs to build, test and run.
# Idempotent: packages already present are skipped, and apt is not touched at all
# when nothing is missing. Packaged daemons (etcd, prometheus, nginx) are kept from
# starting on their own: tests start their own instances on loopback ports.
set -euo pipefail

# Build toolchain and libraries.
BUILD_PKGS=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libssl-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libspdlog-dev libfmt-dev libtomlplusplus-dev nlohmann-json3-dev libsimdjson-dev libcli11-dev libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  librust-blake3-dev
  libzmq3-dev libmsgpuck-dev
  libhiredis-dev
  libsystemd-dev
)
# Tools the tests and benchmarks drive as real components.
TEST_PKGS=(
  b3sum etcd-server etcd-client prometheus nginx-light procps iproute2 curl chromium universal-ctags
  redis-server python3-grpcio python3-protobuf
  dpkg-dev fakeroot lintian
)
# Only for `make fuzz` (libFuzzer builds) and `make tidy`.
FUZZ_PKGS=(clang libclang-rt-14-dev clang-tidy clang-format)
# Only for `make bench-report` (the report's plots).
BENCH_PKGS=(gnuplot-nox)
# Only for `make test-package` and `make test-oci` (a fresh bookworm root, an OCI layout).
PACKAGE_PKGS=(mmdebstrap umoci)

want=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}")
if [[ "${1:-}" == "--fuzz" ]]; then
  want+=("${FUZZ_PKGS[@]}")
elif [[ "${1:-}" == "--bench" ]]; then
  want+=("${BENCH_PKGS[@]}")
elif [[ "${1:-}" == "--package" ]]; then
  want+=("${PACKAGE_PKGS[@]}")
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "bootstrap: all ${#want[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  SUDO="sudo"
fi

echo "bootstrap: installing ${#missing[@]} missing packages: ${missing[*]}"
# Keep packaged services from starting on install (policy-rc.d exit 101 = "not allowed").
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  created_policy=1
fi
cleanup() {
  if ((created_policy)); then
    $SUDO rm -f "$policy"
  fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
echo "bootstrap: apt-get update"
$SUDO apt-get update -qq
echo "bootstrap: apt-get install"
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

# Packages that ship daemons: make sure none was left running or enabled.
for svc in etcd prometheus prometheus-node-exporter nginx redis-server; do
  if command -v systemctl >/dev/null 2>&1 && systemctl list-unit-files "$svc.service" >/dev/null 2>&1; then
    $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true
  fi
done
echo "bootstrap: done"
