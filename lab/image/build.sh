#!/usr/bin/env bash
# Build the lab's Debian 12 guest image (debootstrap, no bootloader: qemu boots its kernel directly) into
# the cache, keyed by a hash of this directory; a cached image whose recipe is unchanged is reused as is.
# Prints the image directory on stdout (last line). Must run as root (debootstrap, chroot).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/lib/common.sh
source "$here/../../scripts/lib/common.sh"
mkl_need_root lab/image/build.sh "debootstrap and chroot need root"

cache=${MKL_LAB_CACHE:-/var/cache/minikubelet-lab}
key=$(cd "$here" && cat build.sh configure-rootfs.sh packages | sha256sum | cut -c1-16)
out=$cache/image-$key
if [[ -f $out/done ]]; then
  echo "$out"
  exit 0
fi

host_pkgs=(debootstrap qemu-system-x86 qemu-utils e2fsprogs openssh-client iproute2)
missing=()
for p in "${host_pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if ((${#missing[@]})); then
  mkl_apt_get update -q >&2
  mkl_apt_get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

mirror=${MKL_LAB_MIRROR:-http://deb.debian.org/debian}
work=$cache/build-$key.$$
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
t0=$SECONDS
debootstrap --variant=minbase --include="$(grep -v '^#' "$here/packages" | tr -s '\n' ',' | sed 's/,$//')" \
  bookworm "$work/rootfs" "$mirror" >"$work/../debootstrap-$key.log" 2>&1 \
  || { tail -30 "$work/../debootstrap-$key.log" >&2; exit 1; }
t1=$SECONDS
"$here/configure-rootfs.sh" "$work/rootfs" "$work" >&2
t2=$SECONDS
truncate -s 6G "$work/rootfs.raw"
mkfs.ext4 -q -F -L mkl-root -d "$work/rootfs" "$work/rootfs.raw"
qemu-img convert -O qcow2 "$work/rootfs.raw" "$work/base.qcow2"
rm -f "$work/rootfs.raw"
cp "$work"/rootfs/boot/vmlinuz-* "$work/vmlinuz"
cp "$work"/rootfs/boot/initrd.img-* "$work/initrd.img"
rm -rf "$work/rootfs"
t3=$SECONDS
echo "image timings: debootstrap=$((t1 - t0))s configure=$((t2 - t1))s mkimage=$((t3 - t2))s" | tee "$work/timings" >&2
touch "$work/done"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
# older recipes' images are dead weight once a new one exists
find "$cache" -maxdepth 1 -name 'image-*' ! -name "image-$key" -exec rm -rf {} +
echo "$out"
