#!/usr/bin/env bash
# Builds minikubelet.test/cluster-dns:1 offline: Debian's python3 with its stdlib, dnspython from the
# repository's .venv, and server.py, a small authoritative DNS server standing in for CoreDNS (README.md).
#
#   scripts/images/cluster-dns/build.sh DOCKER_HOST_URL [--force]
#
# Idempotent: does nothing when the image exists with the current build hash.
# Environment: MKL_DNS_PYTHON (default /usr/bin/python3.11), MKL_DNS_SITE (site-packages holding dns/;
#              default: the repository's .venv).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
# shellcheck source=scripts/images/images.env
source "$HERE/../images.env"
# shellcheck source=scripts/images/python-rootfs.sh
source "$HERE/../python-rootfs.sh"
IMAGE=$CLUSTER_DNS_IMAGE
HASH_LABEL=$BUILD_HASH_LABEL

[[ $# -ge 1 ]] || { echo "usage: $0 DOCKER_HOST_URL [--force]" >&2; exit 2; }
export DOCKER_HOST=$1
force=0
[[ ${2:-} == --force ]] && force=1

PY=${MKL_DNS_PYTHON:-/usr/bin/python3.11}
SITE=${MKL_DNS_SITE:-$REPO/.venv/lib/python3.11/site-packages}
[[ -x $PY ]] || { echo "cluster-dns: $PY missing (apt-get install python3.11)" >&2; exit 1; }
[[ -d $SITE/dns ]] || { echo "cluster-dns: $SITE/dns missing (pip install -e '.[test]' installs dnspython)" >&2; exit 1; }

build_hash=$(
  { cat "$HERE/build.sh" "$HERE/server.py" "$HERE/../python-rootfs.sh"; sha256sum "$PY"; cat "$SITE"/dnspython-*.dist-info/RECORD 2>/dev/null || true; } \
    | sha256sum | cut -c1-16
)
current=$(docker image inspect --format "{{index .Config.Labels \"$HASH_LABEL\"}}" "$IMAGE" 2>/dev/null || true)
old_id=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if ((force == 0)) && [[ $current == "$build_hash" ]]; then
  exit 0
fi

work=$(mktemp -d /tmp/mkl-cluster-dns.XXXXXX)
trap 'rm -rf "$work"' EXIT
r=$work/rootfs
python_rootfs "$r" "$PY" "$SITE" dns

cp "$HERE/server.py" "$r/server.py"

tar --numeric-owner --owner=0 --group=0 -C "$r" -c . \
  | docker import \
    --change "LABEL $HASH_LABEL=$build_hash" \
    --change 'ENV ZONE_FILE=/etc/cluster-dns/hosts DOMAIN=cluster.local PORT=53 READY_PORT=8181 PYTHONDONTWRITEBYTECODE=1' \
    --change 'ENTRYPOINT ["/usr/bin/python3", "/server.py"]' \
    - "$IMAGE" >/dev/null
if [[ -n $old_id ]]; then docker image rm "$old_id" >/dev/null 2>&1 || true; fi
echo "cluster-dns: built $IMAGE ($(du -sh "$r" | cut -f1) rootfs, build hash $build_hash)" >&2
