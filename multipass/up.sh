#!/usr/bin/env bash
# The minikubelet lab under Multipass: a kubeadm control plane and N minikubelet workers (docs/lab.md).
#
#   multipass/up.sh [WORKERS]     default 2; run from anywhere; needs multipass, openssl and this checkout
#   multipass/up.sh --down        delete the lab's instances (multipass delete --purge)
#
# Makes the cluster's CA and token on this host (lab/make-cluster-secrets.sh, kept in multipass/.lab/), builds
# the wheelhouse for Ubuntu 24.04's Python 3.12 (scripts/build-wheelhouse), renders the cloud-init templates
# next to this script, launches `cp`, waits for kubeadm, then launches worker-1..N and joins each with
# lab/provision-worker.sh. Running it again skips what exists.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
state=$here/.lab
workers=${1:-2}
image=${MKL_MULTIPASS_IMAGE:-24.04}

if [[ $workers == --down ]]; then
  mapfile -t names < <(multipass list --format csv | awk -F, 'NR > 1 && ($1 == "cp" || $1 ~ /^worker-[0-9]+$/) {print $1}')
  ((${#names[@]} == 0)) || multipass delete --purge "${names[@]}"
  exit 0
fi
exists() { multipass info "$1" >/dev/null 2>&1; }
b64() { base64 -w0 <"$1"; }

read -r token ca_hash < <("$root/lab/make-cluster-secrets.sh" "$state/secrets")
[[ -d $state/wheelhouse ]] || "$root/scripts/build-wheelhouse" "$state/wheelhouse" --python-version 3.12

sed -e "s|@CA_CRT@|$(b64 "$state/secrets/ca.crt")|" -e "s|@CA_KEY@|$(b64 "$state/secrets/ca.key")|" \
    -e "s|@TOKEN@|$(b64 "$state/secrets/token")|" \
    -e "s|@PROVISION_CONTROL_PLANE@|$(b64 "$root/lab/provision-control-plane.sh")|" \
    "$here/control-plane.yaml" >"$state/control-plane.yaml"
sed -e "s|@PROVISION_WORKER@|$(b64 "$root/lab/provision-worker.sh")|" "$here/worker.yaml" >"$state/worker.yaml"

exists cp || multipass launch "$image" --name cp --cpus 2 --memory 3G --disk 15G --cloud-init "$state/control-plane.yaml"
multipass exec cp -- cloud-init status --wait >/dev/null || true
multipass exec cp -- sudo kubectl --kubeconfig /etc/kubernetes/admin.conf get --raw /readyz >/dev/null || {
  echo "up.sh: the control plane is not ready; see: multipass exec cp -- sudo cat /var/log/lab-provision.log" >&2; exit 1; }
cp_ip=$(multipass info cp --format csv | awk -F, 'NR == 2 {print $3}')

for i in $(seq "$workers"); do
  name=worker-$i
  exists "$name" || multipass launch "$image" --name "$name" --cpus 2 --memory 2G --disk 10G --cloud-init "$state/worker.yaml"
  multipass exec "$name" -- cloud-init status --wait >/dev/null || true
  multipass exec "$name" -- rm -rf /tmp/wheelhouse
  multipass transfer --recursive "$state/wheelhouse" "$name:/tmp/wheelhouse"
  ip=$(multipass info "$name" --format csv | awk -F, 'NR == 2 {print $3}')
  multipass exec "$name" -- sudo /root/lab/provision-worker.sh --api "https://$cp_ip:6443" --token "$token" \
    --ca-cert-hash "$ca_hash" --wheelhouse /tmp/wheelhouse --node-ip "$ip" --node-name "$name" --cluster-dns 10.96.0.10
done
multipass exec cp -- sudo kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o wide
