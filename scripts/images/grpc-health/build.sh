#!/usr/bin/env bash
# Builds minikubelet.test/grpc-health:1 offline: a rootfs with Debian's python3, the parts of its
# stdlib grpc needs, grpcio + grpcio-health-checking + protobuf, and server.py (see README.md).
#
#   scripts/images/grpc-health/build.sh DOCKER_HOST_URL [--force]
#
# Idempotent: does nothing when the image exists with the current build hash.
# Environment: MKL_GRPC_PYTHON (default /usr/bin/python3.11; must be 3.11 like the wheels),
#              MKL_GRPC_SITE (site-packages holding grpc, grpc_health and google/protobuf;
#              default: the repository's .venv).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
IMAGE=minikubelet.test/grpc-health:1
HASH_LABEL=minikubelet.test/build-hash
# shellcheck source=scripts/images/python-rootfs.sh
source "$HERE/../python-rootfs.sh"

[[ $# -ge 1 ]] || { echo "usage: $0 DOCKER_HOST_URL [--force]" >&2; exit 2; }
export DOCKER_HOST=$1
force=0
[[ ${2:-} == --force ]] && force=1

PY=${MKL_GRPC_PYTHON:-/usr/bin/python3.11}
SITE=${MKL_GRPC_SITE:-$REPO/.venv/lib/python3.11/site-packages}
[[ -x $PY ]] || { echo "grpc-health: $PY missing (apt-get install python3.11)" >&2; exit 1; }
for pkg in grpc grpc_health google/protobuf typing_extensions.py; do
  [[ -e $SITE/$pkg ]] || { echo "grpc-health: $SITE/$pkg missing (pip install grpcio grpcio-health-checking)" >&2; exit 1; }
done

build_hash=$(
  { cat "$HERE/build.sh" "$HERE/server.py" "$HERE/../python-rootfs.sh"; sha256sum "$PY";
    cat "$SITE"/grpcio-*.dist-info/RECORD "$SITE"/protobuf-*.dist-info/RECORD 2>/dev/null || true; } \
    | sha256sum | cut -c1-16
)
current=$(docker image inspect --format "{{index .Config.Labels \"$HASH_LABEL\"}}" "$IMAGE" 2>/dev/null || true)
old_id=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if ((force == 0)) && [[ $current == "$build_hash" ]]; then
  exit 0
fi

work=$(mktemp -d /tmp/mkl-grpc-health.XXXXXX)
trap 'rm -rf "$work"' EXIT
r=$work/rootfs
python_rootfs "$r" "$PY" "$SITE" grpc grpc_health google typing_extensions.py

cp "$HERE/server.py" "$r/server.py"

tar --numeric-owner --owner=0 --group=0 -C "$r" -c . \
  | docker import \
    --change "LABEL $HASH_LABEL=$build_hash" \
    --change 'ENV PORT=50051 HEALTHY_FILE=/tmp/healthy PYTHONDONTWRITEBYTECODE=1' \
    --change 'ENTRYPOINT ["/usr/bin/python3", "/server.py"]' \
    - "$IMAGE" >/dev/null
# Drop the image this one replaces, unless something still uses it.
if [[ -n $old_id ]]; then docker image rm "$old_id" >/dev/null 2>&1 || true; fi
echo "grpc-health: built $IMAGE ($(du -sh "$r" | cut -f1) rootfs, build hash $build_hash)" >&2
