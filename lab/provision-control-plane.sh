#!/usr/bin/env bash
# The lab's control plane: stock kubeadm v1.36 on Debian 12 (or Ubuntu 24.04 under Multipass) (containerd, the kubelet for its own static pods),
# adopting the CA and bootstrap token made on the host by lab/make-cluster-secrets.sh, so workers can join
# with `lab/provision-worker.sh` right away. As root, on the control-plane VM (needs the internet: apt
# repositories pkgs.k8s.io and download.docker.com, images from registry.k8s.io):
#
#   lab/provision-control-plane.sh --secrets DIR --advertise-address IP [--pod-network-cidr 10.244.0.0/16]
#
# It also gives the control plane node a plain bridge CNI config (so it turns Ready without a CNI DaemonSet
# that would land on the minikubelet workers), and installs metrics-server on the control plane with host
# networking (so `kubectl top` works without pod networking across nodes). Running it again changes nothing.
set -euo pipefail

secrets='' address='' pod_cidr=10.244.0.0/16 k8s_minor=v1.36
while (($#)); do
  case $1 in
    --secrets) secrets=$2; shift 2 ;;
    --advertise-address) address=$2; shift 2 ;;
    --pod-network-cidr) pod_cidr=$2; shift 2 ;;
    *) echo "provision-control-plane: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $secrets && -n $address ]] || { echo "usage: $0 --secrets DIR --advertise-address IP" >&2; exit 2; }
[[ $EUID -eq 0 ]] || { echo "provision-control-plane: run as root" >&2; exit 1; }
say() { echo "provision-control-plane: $*"; }
export DEBIAN_FRONTEND=noninteractive KUBECONFIG=/etc/kubernetes/admin.conf
apt_get() { apt-get -o DPkg::Lock::Timeout=300 -q "$@"; }

# kernel settings kubeadm's preflight checks
swapoff -a
sed -i '/\sswap\s/s/^/#/' /etc/fstab
printf 'overlay\nbr_netfilter\n' >/etc/modules-load.d/k8s.conf
modprobe overlay && modprobe br_netfilter
printf 'net.ipv4.ip_forward = 1\nnet.bridge.bridge-nf-call-iptables = 1\n' >/etc/sysctl.d/k8s.conf
sysctl -q --system

if ! command -v kubeadm >/dev/null || ! command -v containerd >/dev/null; then
  apt_get update
  apt_get install -y ca-certificates curl gpg conntrack containernetworking-plugins
  install -d -m 0755 /etc/apt/keyrings
  curl -fsSL "https://pkgs.k8s.io/core:/stable:/$k8s_minor/deb/Release.key" | gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes.gpg
  echo "deb [signed-by=/etc/apt/keyrings/kubernetes.gpg] https://pkgs.k8s.io/core:/stable:/$k8s_minor/deb/ /" >/etc/apt/sources.list.d/kubernetes.list
  # containerd 2.x from Docker's repository (Debian 12's containerd 1.6 is older than the v1.36 kubelet supports)
  # shellcheck source=/dev/null
  . /etc/os-release  # debian/bookworm, or ubuntu/noble under Multipass
  curl -fsSL "https://download.docker.com/linux/$ID/gpg" | gpg --batch --yes --dearmor -o /etc/apt/keyrings/docker.gpg
  echo "deb [signed-by=/etc/apt/keyrings/docker.gpg] https://download.docker.com/linux/$ID $VERSION_CODENAME stable" >/etc/apt/sources.list.d/docker.list
  apt_get update
  apt_get install -y kubelet kubeadm kubectl containerd.io
  apt-mark hold kubelet kubeadm kubectl >/dev/null
fi

if ! grep -q 'SystemdCgroup = true' /etc/containerd/config.toml 2>/dev/null; then
  say "containerd: default config with the systemd cgroup driver (kubeadm's default)"
  containerd config default >/etc/containerd/config.toml
  sed -i 's/SystemdCgroup = false/SystemdCgroup = true/' /etc/containerd/config.toml
  grep -q 'SystemdCgroup = true' /etc/containerd/config.toml || { echo "could not set SystemdCgroup" >&2; exit 1; }
  systemctl restart containerd
fi
mkdir -p /opt/cni/bin
for p in /usr/lib/cni/*; do ln -sf "$p" /opt/cni/bin/; done

if [[ ! -f /etc/kubernetes/admin.conf ]]; then
  install -d -m 0755 /etc/kubernetes/pki
  install -m 0644 "$secrets/ca.crt" /etc/kubernetes/pki/ca.crt
  install -m 0600 "$secrets/ca.key" /etc/kubernetes/pki/ca.key
  cat >/root/kubeadm.yaml <<YAML
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: "$(cat "$secrets/token")"
  ttl: 0s
  usages: [signing, authentication]
  groups: [system:bootstrappers:kubeadm:default-node-token]
localAPIEndpoint:
  advertiseAddress: $address
nodeRegistration:
  kubeletExtraArgs:
  - name: node-ip
    value: $address
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
networking:
  podSubnet: $pod_cidr
apiServer:
  certSANs: [$address]
YAML
  say "kubeadm init (a few minutes: it pulls the control plane's images)"
  kubeadm init --config /root/kubeadm.yaml
fi
install -d -m 0700 /root/.kube && cp /etc/kubernetes/admin.conf /root/.kube/config

node=$(kubectl get nodes -l node-role.kubernetes.io/control-plane -o jsonpath='{.items[0].metadata.name}')
cidr=$(kubectl get node "$node" -o jsonpath='{.spec.podCIDR}')
if [[ ! -f /etc/cni/net.d/10-lab-bridge.conflist && -n $cidr ]]; then
  say "CNI: a bridge on $cidr for the control plane's own pods"
  mkdir -p /etc/cni/net.d
  cat >/etc/cni/net.d/10-lab-bridge.conflist <<JSON
{"cniVersion": "1.0.0", "name": "lab", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
fi

if ! kubectl -n kube-system get deployment metrics-server >/dev/null 2>&1; then
  say "metrics-server, on the control plane with host networking"
  kubectl apply -f https://github.com/kubernetes-sigs/metrics-server/releases/latest/download/components.yaml
fi
kubectl -n kube-system patch deployment metrics-server --type=json -p='[
  {"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": ["--cert-dir=/tmp",
   "--secure-port=4443", "--kubelet-preferred-address-types=InternalIP", "--kubelet-use-node-status-port",
   "--metric-resolution=15s", "--kubelet-insecure-tls"]},
  {"op": "replace", "path": "/spec/template/spec/containers/0/ports",
   "value": [{"name": "https", "containerPort": 4443, "protocol": "TCP"}]},
  {"op": "add", "path": "/spec/template/spec/hostNetwork", "value": true},
  {"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"node-role.kubernetes.io/control-plane": ""}},
  {"op": "add", "path": "/spec/template/spec/tolerations", "value": [
   {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]}]' >/dev/null
say "ready: workers join with lab/provision-worker.sh --api https://$address:6443 --token $(cat "$secrets/token") ..."
