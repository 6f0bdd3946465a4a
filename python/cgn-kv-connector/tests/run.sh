#!/bin/sh
# run.sh NAME PACKAGE_DIR PATTERN: the connector's tests under the first python3 that imports grpc
# and google.protobuf (Debian's /usr/bin/python3 with python3-grpcio and python3-protobuf first;
# a pyenv python3 on PATH usually has neither). None: exit 77, which ctest reports as skipped.
name=$1 pkg=$2 pattern=$3
here=$(cd "$(dirname "$0")" && pwd)
py=
for candidate in /usr/bin/python3 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import grpc, google.protobuf' >/dev/null 2>&1; then
    py=$candidate
    break
  fi
done
if [ -z "$py" ]; then
  echo "[ cgn-skip ] $name: no python3 imports grpc and google.protobuf" \
       "(Debian: python3-grpcio python3-protobuf); skipped"
  if [ -n "$CGN_SKIP_LOG" ]; then
    echo "$name: all (no python3 with grpc and protobuf)" >>"$CGN_SKIP_LOG"
  fi
  exit 77
fi
if [ ! -f "$pkg/cgn_kv_connector/_proto/kvcached_pb2.py" ]; then
  echo "$name: $pkg has no generated stubs (build the cgn_kv_connector_stubs target, or make stubs)" >&2
  exit 1
fi
PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 exec "$py" "$here/main.py" "$name" "$pattern"
