"""`minikubelet run|version|join|reset`."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING

from cri.endpoint import speaks_docker_api
from minikubelet import KUBERNETES_VERSION, __version__
from minikubelet.base.quantity import to_bytes
from minikubelet.config.flags import build_parser, flags_to_overrides
from minikubelet.config.kubelet_config import ConfigError, KubeletConfig, load_config
from minikubelet.logs import setup_logging
from minikubelet.node.rlimits import raise_nofile_limit

if TYPE_CHECKING:
    from cri.remote import RemoteRuntime

log = logging.getLogger("minikubelet")


async def _run(config: KubeletConfig, node_ip: str) -> int:
    from cri.docker import DockerRuntime
    from minikubelet.agent import Agent

    runtime: DockerRuntime | RemoteRuntime
    if speaks_docker_api(config.container_runtime_endpoint):
        runtime = DockerRuntime(config.container_runtime_endpoint, config.pod_infra_container_image,
                                log_max_size=to_bytes(config.container_log_max_size),
                                log_max_files=config.container_log_max_files)
    else:
        # grpc and protobuf (about 20 MiB resident) are loaded only for a CRI endpoint.
        from cri.remote import RemoteRuntime

        # The sandbox image and log rotation are the CRI runtime's own configuration (sandbox_image, ...).
        runtime = RemoteRuntime(config.container_runtime_endpoint)
    try:
        await runtime.connect()
        agent = Agent(config, runtime, node_ip=node_ip)
        await agent.run()
    finally:
        await runtime.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    from minikubelet.install.commands import add_commands, run_command

    parser = build_parser(add_commands)
    ns = parser.parse_args(argv)
    if ns.command == "version":
        print(f"minikubelet {__version__} (kubelet semantics {KUBERNETES_VERSION})")
        return 0
    if ns.command in ("join", "reset"):
        return asyncio.run(run_command(ns))
    try:
        config, warnings = load_config(ns.config, flags_to_overrides(ns))
    except ConfigError as e:
        print(f"minikubelet: invalid configuration: {e}", file=sys.stderr)
        return 2
    setup_logging(config.verbosity)
    for w in warnings:
        log.warning(w)
    raise_nofile_limit()
    # Work handed to threads (the stats pass, file walks) is CPU-bound Python: with CPython's default 5 ms GIL
    # switch interval the event loop waited up to 5 ms per syscall for the GIL and /healthz stalled 100+ ms
    # during a stats pass; 1 ms bounds that (docs/decisions.md).
    sys.setswitchinterval(0.001)
    try:
        return asyncio.run(_run(config, getattr(ns, "node_ip", None) or ""))
    except KeyboardInterrupt:
        return 0
    except Exception as e:
        log.error("minikubelet failed", extra={"kv": {"err": str(e) or type(e).__name__}})
        return 1


if __name__ == "__main__":
    sys.exit(main())
