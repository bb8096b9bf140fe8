#!/usr/bin/env bash
# Builds minikubelet.test/curl:1 offline: the busybox test image plus Debian's dynamic curl and the shared
# libraries ldd lists for it (README.md). Run after scripts/images/build (scripts/testenv does).
#
#   scripts/images/curl/build.sh DOCKER_HOST_URL [--force]
#
# Idempotent: does nothing when the image exists with the current build hash.
# Environment: MKL_CURL_BIN (default /usr/bin/curl).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/images/images.env
source "$HERE/../images.env"
IMAGE=$CURL_IMAGE
HASH_LABEL=$BUILD_HASH_LABEL

[[ $# -ge 1 ]] || { echo "usage: $0 DOCKER_HOST_URL [--force]" >&2; exit 2; }
export DOCKER_HOST=$1
force=0
[[ ${2:-} == --force ]] && force=1

CURL=${MKL_CURL_BIN:-/usr/bin/curl}
[[ -x $CURL ]] || { echo "curl image: $CURL missing (apt-get install curl)" >&2; exit 1; }
base_id=$(docker image inspect --format '{{.Id}}' "$BUSYBOX_IMAGE" 2>/dev/null) \
  || { echo "curl image: $BUSYBOX_IMAGE missing (scripts/images/build first)" >&2; exit 1; }

build_hash=$({ cat "$HERE/build.sh"; echo "$base_id"; sha256sum "$CURL"; } | sha256sum | cut -c1-16)
current=$(docker image inspect --format "{{index .Config.Labels \"$HASH_LABEL\"}}" "$IMAGE" 2>/dev/null || true)
old_id=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if ((force == 0)) && [[ $current == "$build_hash" ]]; then
  exit 0
fi

work=$(mktemp -d /tmp/mkl-curl.XXXXXX)
cid=
cleanup() { [[ -n $cid ]] && docker rm "$cid" >/dev/null 2>&1; rm -rf "$work"; }
trap cleanup EXIT
r=$work/rootfs
mkdir -p "$r"
cid=$(docker create "$BUSYBOX_IMAGE")
docker export "$cid" | tar -C "$r" -x
# Docker's own files in an exported container; the runtime mounts fresh ones.
rm -f "$r/.dockerenv"

cp -L "$CURL" "$r/bin/curl.real"
rm -f "$r/bin/curl"  # busybox has no curl applet, but be sure the link is ours
mv "$r/bin/curl.real" "$r/bin/curl"
deps() { ldd "$1" 2>/dev/null | awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]+ \(/ { print $1 }'; }
mapfile -t libs < <(deps "$CURL" | sort -u)
for f in "${libs[@]}"; do
  [[ -n $f ]] && cp -L --parents "$f" "$r/"
done

tar --numeric-owner --owner=0 --group=0 -C "$r" -c . \
  | docker import \
    --change "LABEL $HASH_LABEL=$build_hash" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["sh"]' \
    - "$IMAGE" >/dev/null
if [[ -n $old_id ]]; then docker image rm "$old_id" >/dev/null 2>&1 || true; fi
echo "curl image: built $IMAGE ($(du -sh "$r" | cut -f1) rootfs, build hash $build_hash)" >&2
