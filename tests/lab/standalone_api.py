"""The test API server as a long-running process, for labs whose nodes join from outside pytest
(lab/vagrant-local.sh: Vagrant workers join it through the Vagrantfile's own provisioning):

    python -m tests.lab.standalone_api --host 192.168.56.1 --port 6443 --dir DIR

It serves until SIGTERM or SIGINT, with a bootstrap token and `kube-public/cluster-info` published as
`kubeadm init` leaves them, and writes what a joining node and an operator need into DIR:
`join.env` (MKL_API_SERVER, MKL_JOIN_TOKEN, MKL_CA_HASH, the Vagrantfile's external control plane knobs),
`admin.kubeconfig` (system:masters) with `admin.crt`/`admin.key`, `ca.crt`, and `ready` once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import signal
import string
from pathlib import Path

from tests.apiserver import ApiServer
from tests.lab.provision import ca_cert_hash


def _token_part(n: int) -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(n))


async def serve(host: str, port: int, workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "ready").unlink(missing_ok=True)
    api = ApiServer(workdir / "api", host=host, port=port, max_watch_seconds=30, workloads=True)
    await api.start()
    try:
        token = api.add_bootstrap_token(_token_part(6), _token_part(16)).token
        admin = api.admin_identity()
        api.write_kubeconfig(workdir / "admin.kubeconfig", admin)
        assert admin.cert_file is not None and admin.key_file is not None
        (workdir / "admin.crt").write_bytes(admin.cert_file.read_bytes())
        (workdir / "admin.key").write_bytes(admin.key_file.read_bytes())
        (workdir / "admin.key").chmod(0o600)
        (workdir / "ca.crt").write_bytes(api.ca.cert_pem)
        (workdir / "join.env").write_text(
            f"MKL_API_SERVER={api.url}\nMKL_JOIN_TOKEN={token}\nMKL_CA_HASH={ca_cert_hash(api.ca.cert_pem)}\n")
        (workdir / "ready").write_text(f"{api.url}\n")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"standalone_api: serving {api.url}", flush=True)
        await stop.wait()
    finally:
        await api.stop()
        (workdir / "ready").unlink(missing_ok=True)
    for v in api.violations:
        print(f"standalone_api: violation: {v}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.lab.standalone_api", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", required=True, help="address to listen on (the lab network's host address)")
    parser.add_argument("--port", type=int, default=6443)
    parser.add_argument("--dir", type=Path, required=True, help="where join.env, admin.kubeconfig, … go")
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port, args.dir))


if __name__ == "__main__":
    main()
