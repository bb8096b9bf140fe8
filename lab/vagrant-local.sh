#!/usr/bin/env bash
# `vagrant up --provider=libvirt` of vagrant/Vagrantfile on one machine without the internet: a box built from
# the VM lab's cached guest image, libvirt inside a network namespace, the workers joining the project's test
# API server (tests/lab/standalone_api.py) through the Vagrantfile's own provisioning (MKL_CONTROL_PLANE=external,
# lab/provision-worker.sh, `minikubelet join`). docs/lab.md, "Vagrant with a locally built box". As root.
#
#   lab/vagrant-local.sh up       netns, libvirtd, pool, box, API server, `vagrant up`, node Ready, a pod Running
#   lab/vagrant-local.sh cp       `vagrant up cp` (the kubeadm control plane) as far as it goes offline
#   lab/vagrant-local.sh ssh ...  `vagrant ssh worker-1 ...` inside the namespace
#   lab/vagrant-local.sh destroy  `vagrant destroy -f` of the workers (the host side stays up)
#   lab/vagrant-local.sh down     destroy the VMs, stop the API server and libvirtd, restore qemu.conf, delete
#                                 the namespace and the state directory
#
# Environment: MKL_VAGRANT_NETNS (mkl-vagrant), MKL_LAB_CACHE (/var/cache/minikubelet-lab: the image is read,
# never written, unless lab/image/build.sh has to build it), MKL_WORKER_MEMORY (1280), MKL_VAGRANT_DRIVER (qemu:
# software emulation; kvm where /dev/kvm runs stock kernels). State: /var/tmp/minikubelet-vagrant-$NETNS.
#
# libvirtd runs by hand in the namespace (its NAT networks, dnsmasq and iptables rules exist only there) with
# cgroups, security drivers and virtlogd off in /etc/libvirt/qemu.conf (saved first, restored by `down`): the
# machine this was written on has cgroup v1 that must stay untouched, no systemd as PID 1, no AppArmor.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
# shellcheck source=scripts/lib/common.sh
source scripts/lib/common.sh
mkl_need_root lab/vagrant-local.sh "it runs libvirtd and creates a network namespace"

NETNS=${MKL_VAGRANT_NETNS:-mkl-vagrant}
STATE=/var/tmp/minikubelet-vagrant-$NETNS
API_ADDR=10.216.16.1        # on the namespace's lo: guests reach it through their default route
BOX=minikubelet/lab-bookworm
QEMU_CONF=/etc/libvirt/qemu.conf
T0=$SECONDS
say() { echo "vagrant-local: $*" >&2; }
step() { say "$1 ($((SECONDS - t))s, total $((SECONDS - T0))s)"; t=$SECONDS; }
stamp() { local s=$SECONDS l; while IFS= read -r l; do printf '%5ds %s\n' $((SECONDS - s)) "$l"; done; }
t=$SECONDS

in_ns() { ip netns exec "$NETNS" "$@"; }
vagrant_env() {
  # shellcheck source=/dev/null
  [[ -f $STATE/api/join.env ]] && set -a && source "$STATE/api/join.env" && set +a
  # external unless told otherwise: a kubeadm-mode Vagrantfile makes the cluster secrets in vagrant/.lab
  export MKL_CONTROL_PLANE=${MKL_CONTROL_PLANE:-external}
  export VAGRANT_HOME=$STATE/vagrant.d VAGRANT_DOTFILE_PATH=$STATE/dotvagrant VAGRANT_CHECKPOINT_DISABLE=1 \
    MKL_BOX=$BOX MKL_SSH_KEY=$STATE/id_ed25519 MKL_LIBVIRT_DRIVER=${MKL_VAGRANT_DRIVER:-qemu} \
    MKL_WHEELHOUSE=$STATE/wheelhouse MKL_WORKERS=${MKL_WORKERS:-1} MKL_WORKER_MEMORY=${MKL_WORKER_MEMORY:-1280} \
    MKL_CP_MEMORY=${MKL_CP_MEMORY:-1536}
}
vagrant_ns() { (vagrant_env; cd "$ROOT/vagrant" && in_ns vagrant "$@"); }
virsh_ns() { in_ns virsh -q -c qemu:///system "$@"; }
pid_of() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null && cat "$1"; }
api() {  # api METHOD PATH [BODY]: the test API server as system:masters
  in_ns curl -sS --fail-with-body --cacert "$STATE/api/ca.crt" --cert "$STATE/api/admin.crt" \
    --key "$STATE/api/admin.key" -X "$1" -H 'Content-Type: application/json' ${3:+--data "$3"} \
    "https://$API_ADDR:6443$2"
}

# ---------------------------------------------------------------------------------------------------------
# the host side: packages, qemu.conf, namespace, libvirtd, pool, box, API server

packages() {
  local need=() p made_policy=0 rc=0
  for p in vagrant vagrant-libvirt libvirt-daemon-system libvirt-clients qemu-system-x86 qemu-utils dnsmasq-base \
    iptables curl openssh-client; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
  done
  ((${#need[@]})) || return 0
  say "installing ${need[*]}"
  # no package may start a daemon in the host's network namespace (libvirtd would, with its NAT bridge)
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made_policy=1
  fi
  mkl_apt_get install -y -q --no-install-recommends "${need[@]}" </dev/null || rc=$?
  ((made_policy)) && rm -f /usr/sbin/policy-rc.d
  return "$rc"
}

qemu_conf() {
  [[ -f $STATE/qemu.conf.orig ]] || cp -p "$QEMU_CONF" "$STATE/qemu.conf.orig"
  cp -p "$STATE/qemu.conf.orig" "$QEMU_CONF"
  cat >>"$QEMU_CONF" <<'EOF'
# lab/vagrant-local.sh (restored by `lab/vagrant-local.sh down`)
cgroup_controllers = [ ]
security_driver = "none"
stdio_handler = "file"
user = "root"
group = "root"
EOF
}

netns_up() {
  ip netns list | grep -qx "$NETNS" && return 0
  ip netns add "$NETNS"
  ip -n "$NETNS" link set lo up
  ip -n "$NETNS" addr add "$API_ADDR/32" dev lo
  in_ns sysctl -q -w net.ipv4.ip_forward=1
}

libvirtd_up() {
  pid_of "$STATE/libvirtd.pid" >/dev/null && return 0
  if [[ -S /run/libvirt/libvirt-sock ]]; then
    say "a libvirtd already serves /run/libvirt/libvirt-sock: stop it first (this script runs its own in $NETNS)"
    exit 1
  fi
  [[ -d /run/libvirt ]] || touch "$STATE/made-run-libvirt"
  in_ns libvirtd -d -p "$STATE/libvirtd.pid"
  for _ in $(seq 60); do virsh_ns version >/dev/null 2>&1 && break; sleep 0.5; done
  virsh_ns version >/dev/null
  if ! virsh_ns pool-info default >/dev/null 2>&1; then
    mkdir -p "$STATE/pool"
    virsh_ns pool-define-as default dir --target "$STATE/pool" >/dev/null
  fi
  virsh_ns pool-start default >/dev/null 2>&1 || true
}

box() {
  local image
  image=${MKL_LAB_IMAGE:-$(lab/image/build.sh | tail -n 1)}
  [[ -f $image/done ]] || { say "no guest image at $image"; exit 1; }
  install -m 600 "$image/id_ed25519" "$STATE/id_ed25519"
  (vagrant_env; vagrant box list 2>/dev/null | grep -q "^$BOX ") && return 0
  mkdir -p "$STATE/box"
  cp "$image/vmlinuz" "$image/initrd.img" "$STATE/box/"
  printf '{"provider": "libvirt", "format": "qcow2", "virtual_size": %s}\n' \
    "$(qemu-img info --output=json "$image/base.qcow2" | python3 -c 'import json,sys; print(-(-json.load(sys.stdin)["virtual-size"] // 2**30))')" \
    >"$STATE/box/metadata.json"
  # The image has no bootloader and configures no network by itself (the CI lab passes its address on the
  # kernel command line): boot its kernel directly, and let systemd-networkd take a DHCP lease from libvirt's
  # dnsmasq, which is how vagrant-libvirt learns the guest's address.
  cat >"$STATE/box/Vagrantfile" <<'EOF'
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.kernel = File.join(__dir__, "vmlinuz")
    lv.initrd = File.join(__dir__, "initrd.img")
    lv.cmd_line = "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 systemd.show_status=0 " \
                  "ip=dhcp systemd.wants=systemd-network-generator.service systemd.wants=systemd-networkd.service"
    lv.random model: "random"
  end
end
EOF
  # the box is a tar of these and the disk as box.img: read from the cache, never written there
  tar -C "$STATE/box" -cf "$STATE/lab-bookworm.box" metadata.json Vagrantfile vmlinuz initrd.img \
    -C "$image" --transform 's,^base.qcow2$,box.img,' base.qcow2
  (vagrant_env; vagrant box add -f --name "$BOX" "$STATE/lab-bookworm.box" >&2)
  rm -f "$STATE/lab-bookworm.box"
}

wheelhouse() {
  [[ -f $STATE/wheelhouse/done ]] && return 0
  scripts/build-wheelhouse "$STATE/wheelhouse" >/dev/null
  touch "$STATE/wheelhouse/done"
}

api_up() {
  pid_of "$STATE/api.pid" >/dev/null && return 0
  # not through in_ns: $! must be the server's pid (`ip netns exec` execs it), not a subshell's
  ip netns exec "$NETNS" .venv/bin/python -m tests.lab.standalone_api --host "$API_ADDR" --port 6443 \
    --dir "$STATE/api" </dev/null >"$STATE/api.log" 2>&1 &
  echo $! >"$STATE/api.pid"
  for _ in $(seq 60); do [[ -f $STATE/api/ready ]] && return 0; sleep 0.5; done
  say "the test API server did not start:"; cat "$STATE/api.log" >&2; exit 1
}

host_up() {
  mkdir -p "$STATE"
  packages; step "packages"
  qemu_conf; netns_up; libvirtd_up; step "netns $NETNS, libvirtd $(cat "$STATE/libvirtd.pid"), pool"
  box; step "box $BOX"
  wheelhouse; step "wheelhouse"
  api_up; step "test API server on https://$API_ADDR:6443"
}

# ---------------------------------------------------------------------------------------------------------
# the guests

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local end=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || { say "timed out waiting for $what"; return 1; }
    sleep 2
  done
}
node_ready() {
  api GET /api/v1/nodes/worker-1 | python3 -c '
import json, sys
n = json.load(sys.stdin)
sys.exit(0 if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]) else 1)'
}
pod_running() { [[ $(api GET /api/v1/namespaces/default/pods/hello | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"].get("phase"))') == Running ]]; }

images_into_guest() {
  # the guests have no registry: scripts/images/build into the guest's engine through a forwarded socket
  local sock=$STATE/worker-1-docker.sock fwd
  (vagrant_env; cd vagrant && vagrant ssh-config worker-1) >"$STATE/ssh-config"
  rm -f "$sock"
  ip netns exec "$NETNS" ssh -F "$STATE/ssh-config" -o ExitOnForwardFailure=yes -N -L "$sock:/run/docker.sock" \
    worker-1 &
  fwd=$!
  wait_for 30 "the forwarded docker socket" test -S "$sock"
  DOCKER_HOST=unix://$sock scripts/images/build >&2 || { kill "$fwd"; return 1; }
  kill "$fwd"
}

up() {
  host_up
  vagrant_env
  say "vagrant up --provider=libvirt (MKL_CONTROL_PLANE=external MKL_API_SERVER=$MKL_API_SERVER MKL_WORKERS=$MKL_WORKERS)"
  MKL_CONTROL_PLANE=external vagrant_ns up --provider=libvirt 2>&1 | stamp | tee "$STATE/vagrant-up.log" >&2
  step "vagrant up"
  wait_for 120 "node worker-1 Ready" node_ready; step "node worker-1 Ready"
  images_into_guest; step "test images in worker-1's Docker Engine"
  api POST /api/v1/namespaces/default/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"hello"},
    "spec":{"nodeName":"worker-1","containers":[{"name":"hello","image":"busybox:1.28","command":["sh","-c","echo hello from $(hostname); sleep 3600"]}]}}' >/dev/null
  wait_for 300 "pod hello Running" pod_running
  step "pod hello Running on $(api GET /api/v1/namespaces/default/pods/hello | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"].get("nodeName"))')"
  # logs come from the node's kubelet API (:10250) through the API server
  say "kubectl logs hello (through the API server): $(api GET /api/v1/namespaces/default/pods/hello/log)"
  MKL_CONTROL_PLANE=external vagrant_ns ssh worker-1 -c \
    'systemctl is-active minikubelet; docker ps --format "{{.Names}} {{.Status}}" | grep hello' >&2
  step "vagrant ssh worker-1"
}

cp_vm() {
  mkdir -p "$STATE"
  packages; qemu_conf; netns_up; libvirtd_up; box
  [[ -d vagrant/.lab ]] || touch "$STATE/made-secrets"
  say "vagrant up cp --provider=libvirt (kubeadm from pkgs.k8s.io: needs the internet)"
  local rc=0
  MKL_CONTROL_PLANE=kubeadm vagrant_ns up cp --provider=libvirt 2>&1 | stamp | tee "$STATE/vagrant-up-cp.log" >&2 \
    || rc=$?
  step "vagrant up cp exited $rc"
}

down() {
  local pid domains d
  if [[ -d $STATE ]] && ip netns list | grep -qx "$NETNS"; then
    if pid=$(pid_of "$STATE/libvirtd.pid"); then
      domains=$(virsh_ns list --all --name)
      [[ -f $STATE/api/join.env ]] && { MKL_CONTROL_PLANE=external vagrant_ns destroy -f >&2 || true; }
      [[ -f $STATE/made-secrets ]] && { MKL_CONTROL_PLANE=kubeadm vagrant_ns destroy -f cp >&2 || true; }
      for d in $(virsh_ns list --all --name); do   # anything vagrant left
        virsh_ns destroy "$d" >/dev/null 2>&1 || true
        virsh_ns undefine "$d" --nvram >/dev/null 2>&1 || virsh_ns undefine "$d" >/dev/null 2>&1 || true
      done
      # what vagrant-libvirt defined (networks, the pool) is kept in /etc/libvirt: undefine it
      for n in $(virsh_ns net-list --all --name); do
        virsh_ns net-destroy "$n" >/dev/null 2>&1 || true
        virsh_ns net-undefine "$n" >/dev/null 2>&1 || true
      done
      virsh_ns pool-destroy default >/dev/null 2>&1 || true
      virsh_ns pool-undefine default >/dev/null 2>&1 || true
      kill "$pid"
      say "stopped libvirtd ($pid)"
      # libvirt's per-domain logs (stdio_handler = "file"): this Vagrantfile's domains are vagrant_<machine>
      for d in $domains vagrant_cp vagrant_worker-{1..9}; do rm -f "/var/log/libvirt/qemu/$d.log"; done
      [[ -f $STATE/made-run-libvirt ]] && rm -rf /run/libvirt   # its runtime state (network status, sockets)
    fi
  fi
  if pid=$(pid_of "$STATE/api.pid" 2>/dev/null); then kill "$pid"; say "stopped the test API server ($pid)"; fi
  if [[ -f $STATE/qemu.conf.orig ]]; then cp -p "$STATE/qemu.conf.orig" "$QEMU_CONF"; say "restored $QEMU_CONF"; fi
  if ip netns del "$NETNS" 2>/dev/null; then say "deleted netns $NETNS"; fi
  [[ -f $STATE/made-secrets ]] && rm -rf vagrant/.lab
  rm -rf "$STATE"
}

case ${1:-} in
  up) up ;;
  cp) cp_vm ;;
  ssh) shift; MKL_CONTROL_PLANE=external vagrant_ns ssh worker-1 "$@" ;;
  destroy) t=$SECONDS; MKL_CONTROL_PLANE=external vagrant_ns destroy -f; step "vagrant destroy -f" ;;
  down) down ;;
  *) echo "usage: $0 up|cp|ssh|destroy|down (see the header)" >&2; exit 2 ;;
esac
