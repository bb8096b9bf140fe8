#!/usr/bin/env bash
# configure-rootfs.sh ROOTFS KEYDIR: make a debootstrapped tree bootable as a lab guest. The guest's
# address, gateway and hostname come from the kernel command line (mkl.ip=, mkl.gw=, systemd.hostname=),
# so one image serves every guest.
set -euo pipefail
r=$1 keydir=$2
ssh-keygen -q -t ed25519 -N '' -C minikubelet-lab -f "$keydir/id_ed25519"
printf '/dev/vda / ext4 rw,relatime,errors=remount-ro 0 1\n' >"$r/etc/fstab"
printf '127.0.0.1 localhost\n' >"$r/etc/hosts"
echo lab-guest >"$r/etc/hostname"
chroot "$r" passwd -d root >/dev/null
mkdir -p "$r/etc/systemd/system/serial-getty@ttyS0.service.d"
cat >"$r/etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf" <<'EOT'
[Service]
ExecStart=
ExecStart=-/sbin/agetty --autologin root --noclear --keep-baud 115200 %I $TERM
EOT
install -d -m 700 "$r/root/.ssh"
install -m 600 "$keydir/id_ed25519.pub" "$r/root/.ssh/authorized_keys"
cat >"$r/usr/local/sbin/mkl-lab-net" <<'EOT'
#!/bin/sh
# the first ethernet link gets mkl.ip= and a default route via mkl.gw= from the kernel command line
ip= gw=
for w in $(cat /proc/cmdline); do
  case $w in mkl.ip=*) ip=${w#mkl.ip=} ;; mkl.gw=*) gw=${w#mkl.gw=} ;; esac
done
[ -n "$ip" ] || exit 0
for d in /sys/class/net/*; do
  [ "$(cat "$d/type")" = 1 ] || continue
  case ${d##*/} in docker*|veth*|br-*|cni*) continue ;; esac
  ifc=${d##*/}; break
done
ip link set "$ifc" up
ip addr replace "$ip" dev "$ifc"
[ -z "$gw" ] || ip route replace default via "$gw" dev "$ifc"
EOT
chmod 755 "$r/usr/local/sbin/mkl-lab-net"
cat >"$r/etc/systemd/system/mkl-lab-net.service" <<'EOT'
[Unit]
Description=Lab guest address from the kernel command line
DefaultDependencies=no
After=systemd-udevd.service systemd-udev-settle.service
Before=network.target network-online.target docker.service ssh.service
Wants=network.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/mkl-lab-net
[Install]
WantedBy=multi-user.target network-online.target
EOT
chroot "$r" systemctl enable mkl-lab-net.service >/dev/null 2>&1
# ssh: host keys made once here (the image is a lab artefact), no DNS lookups (no resolver in the lab)
echo 'UseDNS no' >"$r/etc/ssh/sshd_config.d/lab.conf"
# busybox rootfs for 'docker import': the guests have no registry
b=$(mktemp -d)
mkdir -p "$b/bin" "$b/tmp" "$b/proc" "$b/sys" "$b/dev" "$b/etc"
cp "$r/bin/busybox" "$b/bin/busybox"
chroot "$r" /bin/busybox --list | while read -r a; do [ "$a" = busybox ] || ln -sf busybox "$b/bin/$a"; done
tar -C "$b" -cf "$r/root/busybox-rootfs.tar" .
rm -rf "$b"
rm -f "$r"/var/cache/apt/archives/*.deb
rm -rf "$r"/var/lib/apt/lists/*
rm -rf "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/locale/*
: >"$r/etc/machine-id"
