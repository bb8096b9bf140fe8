#!/usr/bin/env bash
# Turn a Debian 12 machine into a minikubelet worker of a cluster. The ONE provisioning script shared by the
# Vagrant lab (vagrant/Vagrantfile), the Multipass lab (multipass/) and the CI VM lab (tests/lab), so what CI
# proves is what users run. As root, on the worker:
#
#   lab/provision-worker.sh --api https://CP:6443 --token ID.SECRET --ca-cert-hash sha256:HEX \
#       --wheelhouse DIR [--node-ip IP] [--node-name NAME] [--cluster-dns 10.96.0.10] \
#       [--cgroup-driver cgroupfs|systemd] [-- MORE JOIN FLAGS]
#   lab/provision-worker.sh --install-only --wheelhouse DIR [--cgroup-driver D]   steps 1-3 only (e.g. to bake an image)
#
# 1. docker.io and python3-venv, installed with apt only when missing (the CI guests have them and no network);
# 2. Docker's cgroup driver set to --cgroup-driver (default cgroupfs) when it is not (the agent's cgroupDriver,
#    which join gets the same flag for, must match Docker's), Docker restarted only then;
# 3. the agent installed into /opt/minikubelet/venv from DIR (scripts/build-wheelhouse; pip --no-index): the
#    dependencies only when the wheelhouse's set of them changed, the project's wheel only when it changed;
# 4. `minikubelet join`: token discovery of the CA, the node's files, the systemd unit enabled and started;
# 5. waits (up to 5 min) until systemd reports the unit active (Type=notify: after its first sync).
# Running it again changes nothing. `minikubelet reset` (/opt/minikubelet/venv/bin/minikubelet reset) undoes 4.
set -euo pipefail

api='' token='' hash='' wheelhouse='' node_ip='' node_name='' cluster_dns='' install_only=0 cgroup_driver=cgroupfs
extra=()
while (($#)); do
  case $1 in
    --api) api=$2; shift 2 ;;
    --token) token=$2; shift 2 ;;
    --ca-cert-hash) hash=$2; shift 2 ;;
    --wheelhouse) wheelhouse=$2; shift 2 ;;
    --node-ip) node_ip=$2; shift 2 ;;
    --node-name) node_name=$2; shift 2 ;;
    --cluster-dns) cluster_dns=$2; shift 2 ;;
    --install-only) install_only=1; shift ;;
    --cgroup-driver) cgroup_driver=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "provision-worker: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
required=(wheelhouse)
((install_only)) || required+=(api token hash)
for v in "${required[@]}"; do
  [[ -n ${!v} ]] || { echo "provision-worker: --${v/hash/ca-cert-hash} is required" >&2; exit 2; }
done
[[ $EUID -eq 0 ]] || { echo "provision-worker: run as root" >&2; exit 1; }
[[ $cgroup_driver == cgroupfs || $cgroup_driver == systemd ]] \
  || { echo "provision-worker: --cgroup-driver must be cgroupfs or systemd, not $cgroup_driver" >&2; exit 2; }
[[ -d $wheelhouse ]] || { echo "provision-worker: --wheelhouse $wheelhouse is not a directory" >&2; exit 2; }

VENV=/opt/minikubelet/venv
say() { echo "provision-worker: $*"; }

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -q
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q "${missing[@]}"
fi

systemctl enable --now docker >/dev/null 2>&1 || true
driver=$(docker info --format '{{.CgroupDriver}}' 2>/dev/null || echo unknown)
if [[ $driver != "$cgroup_driver" ]]; then
  say "Docker's cgroup driver is $driver; setting $cgroup_driver in /etc/docker/daemon.json"
  mkdir -p /etc/docker
  if [[ -s /etc/docker/daemon.json ]]; then
    python3 - "$cgroup_driver" <<'PY'
import json, sys
p = "/etc/docker/daemon.json"
d = json.load(open(p))
d["exec-opts"] = [o for o in d.get("exec-opts", []) if not o.startswith("native.cgroupdriver=")] + [f"native.cgroupdriver={sys.argv[1]}"]
json.dump(d, open(p, "w"), indent=2)
PY
  else
    echo "{\"exec-opts\": [\"native.cgroupdriver=$cgroup_driver\"]}" >/etc/docker/daemon.json
  fi
  systemctl restart docker
  driver=$(docker info --format '{{.CgroupDriver}}')
  [[ $driver == "$cgroup_driver" ]] || { echo "provision-worker: Docker still reports cgroup driver $driver" >&2; exit 1; }
fi

[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-index --find-links "$wheelhouse")
# under emulation pip's resolver alone takes a minute: skipped when the wheelhouse has not changed
deps=$(find "$wheelhouse" -maxdepth 1 -name '*.whl' ! -name 'minikubelet-*' -printf '%f\n' | sort | sha256sum)
if [[ $(cat "$VENV/.mkl-deps" 2>/dev/null) != "$deps" ]]; then
  "${pip[@]}" --upgrade minikubelet
  echo "$deps" >"$VENV/.mkl-deps"
fi
wheel=$(find "$wheelhouse" -maxdepth 1 -name 'minikubelet-*.whl' | sort | tail -n 1)
[[ -n $wheel ]] || { echo "provision-worker: no minikubelet-*.whl in $wheelhouse" >&2; exit 2; }
# the same version number with new code is still a new agent
sum=$(sha256sum <"$wheel")
if [[ $(cat "$VENV/.mkl-wheel" 2>/dev/null) != "$sum" ]]; then
  "${pip[@]}" --no-deps --force-reinstall "$wheel"
  echo "$sum" >"$VENV/.mkl-wheel"
fi
say "agent: $("$VENV/bin/minikubelet" version)"
((install_only)) && exit 0

args=(join "$api" --token "$token" --discovery-token-ca-cert-hash "$hash" --cgroup-driver "$cgroup_driver")
[[ -n $node_ip ]] && args+=(--node-ip "$node_ip")
[[ -n $node_name ]] && args+=(--node-name "$node_name")
[[ -n $cluster_dns ]] && args+=(--cluster-dns "$cluster_dns")
"$VENV/bin/minikubelet" "${args[@]}" "${extra[@]}"

for _ in $(seq 300); do
  if systemctl is-active --quiet minikubelet; then say "minikubelet.service is active"; exit 0; fi
  if systemctl is-failed --quiet minikubelet; then break; fi
  sleep 1
done
echo "provision-worker: minikubelet.service did not become active:" >&2
journalctl -u minikubelet -n 40 --no-pager >&2 || true
exit 1
