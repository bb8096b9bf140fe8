"""Lifecycle hook handlers (postStart / preStop): exec, httpGet and sleep."""

from __future__ import annotations

from typing import Any

import aiohttp

from cri.runtime import Runtime
from minikubelet.base.clock import Clock
from probes.addresses import PortError, join_host_port, resolve_port


class HookError(Exception):
    pass


async def run_hook(
    handler: dict[str, Any],
    *,
    runtime: Runtime,
    clock: Clock,
    container_id: str,
    container: dict[str, Any],
    pod_ip: str,
    timeout: float,
) -> None:
    """Run one handler; raises HookError with the kubelet-style message on failure."""
    if isinstance(handler.get("exec"), dict):
        cmd = handler["exec"].get("command") or []
        res = await runtime.exec_sync(container_id, [str(x) for x in cmd], timeout=max(timeout, 1.0))
        if res.timed_out:
            raise HookError(f"Exec lifecycle hook ({cmd}) for Container timed out")
        if res.exit_code != 0:
            out = (res.stdout + res.stderr).decode(errors="replace")
            raise HookError(f"Exec lifecycle hook ({cmd}) failed - error: command '{' '.join(map(str, cmd))}' exited with {res.exit_code}: {out}")
        return
    if isinstance(handler.get("httpGet"), dict):
        hg = handler["httpGet"]
        host = hg.get("host") or pod_ip
        scheme = str(hg.get("scheme") or "HTTP").lower()
        path = str(hg.get("path") or "/")
        if not path.startswith("/"):
            path = "/" + path
        try:
            port = resolve_port(hg.get("port"), container)
        except PortError as e:
            raise HookError(f"HTTP lifecycle hook ({path}) for Container failed - error: {e}") from e
        url = f"{scheme}://{join_host_port(str(host), port)}{path}"
        headers = {str(h.get("name")): str(h.get("value")) for h in hg.get("httpHeaders") or [] if isinstance(h, dict)}
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=max(timeout, 1.0))) as s:
                async with s.get(url, headers=headers, ssl=False) as r:
                    await r.read()
                    if r.status >= 400:
                        raise HookError(f"HTTP lifecycle hook ({path}) for Container failed - error: HTTP status {r.status}")
        except (aiohttp.ClientError, TimeoutError) as e:
            raise HookError(f"HTTP lifecycle hook ({path}) for Container failed - error: {e}") from e
        return
    if isinstance(handler.get("sleep"), dict):
        seconds = handler["sleep"].get("seconds", 0)
        if not isinstance(seconds, int) or seconds < 0:
            raise HookError("sleep hook needs a non-negative integer 'seconds'")
        await clock.sleep(min(float(seconds), timeout))
        return
    raise HookError("lifecycle hook has no supported handler (exec, httpGet, sleep)")
