"""Lifecycle hook handlers (upstream lifecycle.handlerRunner): exec, httpGet and sleep.

As upstream: an exec hook has no timeout of its own (preStop is bounded by the caller's grace period);
an httpGet hook fails only when the request fails, whatever the status code; failure messages name
the container and the pod.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from cri.runtime import Runtime
from minikubelet.base.clock import Clock
from minikubelet.base.goformat import go_list, go_quote
from minikubelet.base.podview import ContainerView
from probes.addresses import PortError, join_host_port, resolve_port

HTTP_HOOK_TIMEOUT = 10.0  # the kubelet's HTTP client for hooks: no overall timeout, but a 10 s connect


class HookError(Exception):
    """The hook failed; the message is the kubelet's, for the event and the container's waiting reason."""


async def run_hook(
    handler: dict[str, Any],
    *,
    runtime: Runtime,
    clock: Clock,
    container_id: str,
    container: ContainerView,
    pod_ip: str,
    pod_desc: str,
    sleep_cut: Callable[[], None] = lambda: None,
    http_fallback: Callable[[str], None] = lambda _host: None,
) -> None:
    """Run one handler; raises HookError with the kubelet's message on failure. `pod_desc`: format.Pod(pod).
    `sleep_cut()`: a sleep hook was cancelled before its time was up. `http_fallback(host:port)`: an HTTPS
    httpGet hook got a plain HTTP answer and succeeded when sent again over HTTP."""
    name = go_quote(container.name)
    where = f"for Container {name} in Pod {go_quote(pod_desc)}"
    if isinstance(handler.get("exec"), dict):
        cmd = [str(x) for x in handler["exec"].get("command") or []]
        res = await runtime.exec_sync(container_id, cmd, timeout=0)
        if res.timed_out or res.exit_code != 0:
            output = (res.stdout + res.stderr).decode(errors="replace")
            err = f"command '{' '.join(cmd)}' exited with {res.exit_code}: {res.stderr.decode(errors='replace')}"
            raise HookError(f"Exec lifecycle hook ({go_list(cmd)}) {where} failed - error: {err}, message: {go_quote(output)}")
        return
    if isinstance(handler.get("httpGet"), dict):
        hg = handler["httpGet"]
        path = str(hg.get("path") or "")
        try:
            port = resolve_port(hg.get("port"), container.ports)
        except PortError as e:
            raise HookError(f"HTTP lifecycle hook ({path}) {where} failed - error: {e}") from e
        host = str(hg.get("host") or pod_ip)
        headers = [(str(h.get("name")), str(h.get("value"))) for h in hg.get("httpHeaders") or [] if isinstance(h, dict)]
        # The prober's client (upstream: httpprobe.NewRequestForHTTPGetAction with the "lifecycle" agent).
        from probes.http import HOOK_USER_AGENT, Client, RequestError, SchemeMismatch, probe_headers, probe_url

        request_headers = probe_headers(headers, HOOK_USER_AGENT)
        try:
            url = probe_url(str(hg.get("scheme") or "HTTP"), host, port, path)
            await Client(keep_alive=True, connect_timeout=HTTP_HOOK_TIMEOUT).get(url, request_headers)
        except SchemeMismatch as e:
            # upstream runHTTPHandler: an HTTPS hook answered in plain HTTP is sent again over HTTP, without
            # Authorization; if that fails the first error stands.
            try:
                await Client(keep_alive=True, connect_timeout=HTTP_HOOK_TIMEOUT).get(
                    probe_url("HTTP", host, port, path), request_headers.without("Authorization"))
            except RequestError:
                raise HookError(f"HTTP lifecycle hook ({path}) {where} failed - error: {e}") from e
            http_fallback(join_host_port(host, port))
        except (RequestError, ValueError) as e:
            raise HookError(f"HTTP lifecycle hook ({path}) {where} failed - error: {e}") from e
        return
    if isinstance(handler.get("sleep"), dict):
        seconds = handler["sleep"].get("seconds", 0)
        try:
            await clock.sleep(float(seconds) if isinstance(seconds, int) and seconds > 0 else 0.0)
        except asyncio.CancelledError:
            sleep_cut()
            raise
        return
    raise HookError(f"Cannot run handler: invalid handler: {handler}")
