#!/usr/bin/env bash
# The lab cluster's CA and bootstrap token, made on the HOST before any VM boots, so that workers know the CA's
# pin without asking the control plane (kubeadm init adopts an existing /etc/kubernetes/pki/ca.{crt,key}):
#
#   lab/make-cluster-secrets.sh DIR     creates DIR/ca.crt, DIR/ca.key, DIR/token once; prints "TOKEN HASH"
#
# Needs openssl. The token never expires (kubeadm init --token-ttl 0): fine for a lab, not for anything else.
set -euo pipefail
dir=${1:?usage: $0 DIR}
mkdir -p "$dir"
umask 077
if [[ ! -s $dir/ca.key || ! -s $dir/ca.crt ]]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/ca.key" -out "$dir/ca.crt" -days 3650 -subj "/CN=kubernetes" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign" \
    2>/dev/null
  chmod 644 "$dir/ca.crt"
fi
if [[ ! -s $dir/token ]]; then
  rand() { LC_ALL=C tr -dc 'a-z0-9' </dev/urandom | head -c "$1"; }
  echo "$(rand 6).$(rand 16)" >"$dir/token"
fi
hash=$(openssl x509 -pubkey -noout -in "$dir/ca.crt" | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)
echo "$(cat "$dir/token") sha256:$hash"
