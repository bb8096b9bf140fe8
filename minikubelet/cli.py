"""`minikubelet run|version|join|reset`."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from cri.endpoint import speaks_docker_api
from minikubelet import KUBERNETES_VERSION, __version__
from minikubelet.base.quantity import to_bytes
from minikubelet.config.flags import build_parser, flags_to_overrides
from minikubelet.config.kubelet_config import ConfigError, KubeletConfig, load_config
from minikubelet.logs import setup_logging
from minikubelet.node.lockfile import AgentLocks, ContentionWatch, LockError, take_locks
from minikubelet.node.rlimits import raise_nofile_limit
from minikubelet.node.tls_buffers import shrink_tls_read_buffers

if TYPE_CHECKING:
    from cri.docker import DockerRuntime
    from cri.remote import RemoteRuntime

log = logging.getLogger("minikubelet")


async def exit_on_contention(watch: ContentionWatch, stop: Callable[[], None]) -> None:
    """upstream watchForLockfileContention's goroutine: the first event (or a failed watch) ends the agent."""
    try:
        log.info("Inotify event", extra={"kv": {"event": await watch.wait()}})
    except OSError as e:
        log.error("inotify watcher error", extra={"kv": {"err": str(e)}})
    stop()


async def _run(config: KubeletConfig, node_ip: str, contention: ContentionWatch | None = None) -> int:
    from minikubelet.agent import Agent

    runtime: DockerRuntime | RemoteRuntime
    if speaks_docker_api(config.container_runtime_endpoint):
        # the Docker Engine client (~1.8 MiB) only for a Docker endpoint, as grpclib only for a CRI one
        from cri.docker import DockerRuntime

        runtime = DockerRuntime(config.container_runtime_endpoint, config.pod_infra_container_image,
                                log_max_size=to_bytes(config.container_log_max_size),
                                log_max_files=config.container_log_max_files)
    else:
        # grpclib, h2 and the protobuf modules are loaded only for a CRI endpoint.
        from cri.remote import RemoteRuntime

        # The sandbox image and log rotation are the CRI runtime's own configuration (sandbox_image, ...).
        runtime = RemoteRuntime(config.container_runtime_endpoint)
    watcher: asyncio.Task[None] | None = None
    try:
        await runtime.connect()
        agent = Agent(config, runtime, node_ip=node_ip)
        if contention is not None:
            # events since the lock was taken wait in the inotify queue; a stop during start-up takes effect
            # once the agent runs, as upstream's kubelet waits on its channel only after starting
            watcher = asyncio.create_task(exit_on_contention(contention, agent.stop), name="lock-contention")
        await agent.run()
    finally:
        if watcher is not None:
            watcher.cancel()
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
    shrink_tls_read_buffers()
    # Work handed to threads (the stats pass, file walks) is CPU-bound Python: with CPython's default 5 ms GIL
    # switch interval the event loop waited up to 5 ms per syscall for the GIL and /healthz stalled 100+ ms
    # during a stats pass; 1 ms bounds that (docs/decisions.md).
    sys.setswitchinterval(0.001)
    try:
        locks = _locks(config)
    except KeyboardInterrupt:  # while waiting for --lock-file
        return 0
    if locks is None:
        return 1
    try:
        return asyncio.run(_run(config, getattr(ns, "node_ip", None) or "", locks.contention))
    except KeyboardInterrupt:
        return 0
    except Exception as e:
        log.error("minikubelet failed", extra={"kv": {"err": str(e) or type(e).__name__}})
        return 1
    finally:
        locks.release()


def _locks(config: KubeletConfig) -> AgentLocks | None:
    """--lock-file, then the rootDir lock (two agents on one rootDir and cgroupRoot remove each other's pod
    cgroups as orphans); None, with the reason logged, when the agent must not start."""
    try:
        return take_locks(config.lock_file_path, config.exit_on_lock_contention, config.root_dir)
    except LockError as e:
        log.error("minikubelet failed", extra={"kv": {"err": str(e)}})
        return None


if __name__ == "__main__":
    sys.exit(main())
