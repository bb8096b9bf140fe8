"""`minikubelet run|version|join|reset|explain`."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cri.endpoint import speaks_docker_api
from minikubelet import KUBERNETES_VERSION, __version__
from minikubelet.base.quantity import to_bytes
from minikubelet.config.flags import build_parser, flags_to_overrides
from minikubelet.config.kubelet_config import ConfigError, KubeletConfig, load_config, read_only_endpoint
from minikubelet.explain.client import ExplainError, explain_url, render_wide
from minikubelet.explain.client import fetch as fetch_explanation
from minikubelet.install.layout import CONFIG as INSTALLED_CONFIG
from minikubelet.logs import setup_logging
from minikubelet.node.lockfile import AgentLocks, ContentionWatch, LockError, take_locks
from minikubelet.node.rlimits import raise_nofile_limit
from minikubelet.node.tls_buffers import shrink_tls_read_buffers

if TYPE_CHECKING:
    from cri.docker import DockerRuntime
    from cri.remote import RemoteRuntime
    from minikubelet.sources.manifest_worker import ProcessParser

log = logging.getLogger("minikubelet")


async def exit_on_contention(watch: ContentionWatch, stop: Callable[[], None]) -> None:
    """upstream watchForLockfileContention's goroutine: the first event (or a failed watch) ends the agent."""
    try:
        log.info("Inotify event", extra={"kv": {"event": await watch.wait()}})
    except OSError as e:
        log.error("inotify watcher error", extra={"kv": {"err": str(e)}})
    stop()


async def _run(config: KubeletConfig, node_ip: str, contention: ContentionWatch | None = None) -> int:
    # The manifest parser's process starts before anything else: its interpreter start (100+ ms) then overlaps the
    # agent's imports and the runtime's handshake instead of delaying the first static pod (docs/performance.md).
    parser = await _early_parser(config)
    try:
        return await _run_agent(config, node_ip, contention, parser)
    finally:
        if parser is not None:
            await parser.close()  # the static pod source closes it as well once it ran (a second close is a no-op)


async def _early_parser(config: KubeletConfig) -> ProcessParser | None:
    from minikubelet.sources.manifest_worker import ProcessParser, parser_wanted

    if not parser_wanted(config.static_pod_path, bool(config.static_pod_url)):
        return None
    parser = ProcessParser()
    await parser.prestart()
    return parser


async def _run_agent(config: KubeletConfig, node_ip: str, contention: ContentionWatch | None,
                     parser: ProcessParser | None) -> int:
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
        agent = Agent(config, runtime, node_ip=node_ip, parser=parser)
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

    def more_commands(sub: Any) -> None:
        add_commands(sub)
        add_explain_command(sub)

    parser = build_parser(more_commands)
    ns = parser.parse_args(argv)
    if ns.command == "explain":
        return explain_command(ns)
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


def add_explain_command(sub: Any) -> None:
    e = sub.add_parser("explain", allow_abbrev=False,
                       help="Why a pod on this node is in its state, from the running agent (docs/explain.md).")
    e.add_argument("pod", metavar="NAMESPACE/NAME", help="The pod (a bare NAME is in the namespace default).")
    e.add_argument("-o", "--output", choices=("json", "wide"), default="json", help="JSON (default) or a table.")
    e.add_argument("--config", default=None,
                   help="The agent's KubeletConfiguration file: its read-only port is asked (default: the built-in "
                        f"defaults, or {INSTALLED_CONFIG} when present).")
    e.add_argument("--server", default="", metavar="URL",
                   help="Ask this agent URL instead, e.g. http://127.0.0.1:10255 (overrides --config).")


def explain_command(ns: argparse.Namespace) -> int:
    namespace, _, name = ns.pod.rpartition("/")
    namespace = namespace or "default"
    server = ns.server
    if not server:
        path = ns.config if ns.config is not None else (INSTALLED_CONFIG if os.path.exists(INSTALLED_CONFIG) else None)
        try:
            config, _ = load_config(path, {})
        except ConfigError as e:
            print(f"minikubelet: invalid configuration: {e}", file=sys.stderr)
            return 2
        endpoint = read_only_endpoint(config)
        if endpoint is None:
            print("minikubelet explain: the agent's read-only port is off (a joined node): give --server, or ask "
                  f"through the API server: kubectl get --raw /api/v1/nodes/NODE/proxy/debug/pods/{namespace}/{name}"
                  "/explain", file=sys.stderr)
            return 2
        host, port = endpoint
        host = "127.0.0.1" if host in ("", "0.0.0.0") else ("::1" if host == "::" else host)
        server = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    try:
        doc = asyncio.run(fetch_explanation(explain_url(server, namespace, name)))
    except (ExplainError, ValueError) as e:
        print(f"minikubelet explain: {e}", file=sys.stderr)
        return 1
    print(render_wide(doc) if ns.output == "wide" else json.dumps(doc, indent=2), end="" if ns.output == "wide" else "\n")
    return 0


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
