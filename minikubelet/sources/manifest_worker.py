"""Manifests are parsed, defaulted and validated in a child process, never in the agent.

Parsing a 10 MiB manifest takes seconds of CPU and hundreds of MiB; in the agent that would stall the
event loop (a thread holds the GIL most of that time) and leave the memory in the agent's heap long after
the file is gone. The worker (`python -m minikubelet.sources.parser_process`) reads requests on stdin and
answers on stdout, runs under an address-space limit, and exits when it grew large or sat idle, so its
memory goes back to the system. Only an accepted pod, as JSON, comes back into the agent.

Frames: 4-byte big-endian length, then that many bytes. A request is two frames (JSON header
{"filename", "node", "seen"}, plus "source": "http" for a manifest URL's body, then the bytes); a reply
is one frame in `marshal` format: it loads a 10 MiB pod in ~60 ms where json.loads takes up to 600 ms,
and it builds only plain values.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import marshal
import os
import sys
from typing import Any, Protocol

from minikubelet.api.field import FieldError
from minikubelet.sources.parser_process import FRAME_LEN as _LEN
from minikubelet.sources.parser_process import build_static_pod
from minikubelet.sources.static_pod import HTTP_SOURCE, ManifestError, StaticPod
from minikubelet.sources.url_manifest import build_url_pods, pods_from_reply

log = logging.getLogger("minikubelet.static_pods")

PARSE_TIMEOUT = 30.0
IDLE_EXIT = 30.0


def parser_wanted(static_pod_path: str, has_url: bool) -> bool:
    """Whether the agent parses manifests at all: a static pod directory that exists, or a manifest URL. The
    parser's process is then started before anything else, so the first pod does not wait for it."""
    return has_url or os.path.isdir(static_pod_path)


def pod_from_reply(reply: dict[str, Any]) -> StaticPod:
    pod = StaticPod(reply["pod"])
    pod.warnings = [str(w) for w in reply.get("warnings") or []]
    return pod


def error_from_reply(filename: str, reply: dict[str, Any]) -> ManifestError:
    errors = [FieldError(str(p), str(m), str(r)) for p, m, r in reply.get("errors") or []]
    return ManifestError(filename, str(reply["error"]), errors, reason=str(reply.get("reason", "invalid")))


class Parser(Protocol):
    async def parse(self, data: bytes, filename: str, node: str, seen: float | None) -> StaticPod:
        """The static pod for a manifest; raises ManifestError."""

    async def close(self) -> None: ...

    async def prestart(self) -> None:
        """Be ready for the first manifest before it comes (nothing to do for a parser that needs no start)."""


class InProcessParser:
    """Parses on the caller's thread: for tests and tools, never for the agent."""

    async def parse(self, data: bytes, filename: str, node: str, seen: float | None) -> StaticPod:
        reply = build_static_pod(data, filename, node, seen)
        if "pod" in reply:
            return pod_from_reply(reply)
        raise error_from_reply(filename, reply)

    async def parse_url(self, data: bytes, url: str, node: str, seen: float | None) -> list[StaticPod]:
        reply = build_url_pods(data, url, node, seen)
        if "pods" in reply:
            return pods_from_reply(reply)
        raise error_from_reply(url, reply)

    async def close(self) -> None:
        pass

    async def prestart(self) -> None:
        pass


class ProcessParser:
    """One worker process at a time, started on demand, one request at a time."""

    def __init__(self, timeout: float = PARSE_TIMEOUT, idle: float = IDLE_EXIT) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._timeout = timeout
        self._idle = idle
        self._idle_timer: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task[None] | None = None
        self.started = 0  # workers started so far (tests and metrics read it)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def parse(self, data: bytes, filename: str, node: str, seen: float | None) -> StaticPod:
        reply = await self._request(data, {"filename": filename, "node": node, "seen": seen})
        if "pod" in reply:
            return pod_from_reply(reply)
        raise error_from_reply(filename, reply)

    async def parse_url(self, data: bytes, url: str, node: str, seen: float | None) -> list[StaticPod]:
        """The pods of a manifest URL's body (a Pod or a PodList); raises ManifestError."""
        reply = await self._request(data, {"filename": url, "node": node, "seen": seen, "source": HTTP_SOURCE})
        if "pods" in reply:
            return pods_from_reply(reply)
        raise error_from_reply(url, reply)

    async def prestart(self) -> None:
        """Start a worker now, without waiting for it: its start-up (an interpreter and the parsing modules, 60-150
        ms, more on a loaded node) would otherwise come first on the path of the first pod it parses. It stops
        after the idle period like any other."""
        async with self._lock:
            if self._proc is None or self._proc.returncode is not None:
                await self._worker()
                self._arm_idle()

    async def _request(self, data: bytes, request: dict[str, Any]) -> dict[str, Any]:
        async with self._lock:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            try:
                return await self._ask(data, request)
            finally:
                self._arm_idle()

    def _arm_idle(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._proc is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(self._idle, self._close_idle)

    async def _ask(self, data: bytes, request: dict[str, Any]) -> dict[str, Any]:
        proc = await self._worker()
        assert proc.stdin is not None and proc.stdout is not None
        header = json.dumps(request).encode()
        try:
            proc.stdin.write(_LEN.pack(len(header)) + header + _LEN.pack(len(data)))
            proc.stdin.write(data)
            await proc.stdin.drain()
            raw = await asyncio.wait_for(_read_frame(proc.stdout), self._timeout)
        except TimeoutError:
            await self._kill()
            return {"error": f"parsing took longer than {self._timeout:g}s", "reason": "too_complex", "errors": []}
        except (OSError, asyncio.IncompleteReadError):
            code = await self._kill()
            return {"error": f"the parser process died ({_exit_text(code)})", "reason": "too_complex", "errors": []}
        reply = marshal.loads(raw)
        if not isinstance(reply, dict):
            await self._kill()
            return {"error": "the parser process answered nonsense", "reason": "too_complex", "errors": []}
        if reply.pop("exit", False):
            await self._reap()
        return reply

    def _close_idle(self) -> None:
        self._closing = asyncio.ensure_future(self.close())

    async def _worker(self) -> asyncio.subprocess.Process:
        if self._proc is None or self._proc.returncode is not None:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "minikubelet.sources.parser_process",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            self.started += 1
        return self._proc

    async def _kill(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        return await proc.wait()

    async def _reap(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            await proc.wait()

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


def _exit_text(code: int | None) -> str:
    if code is None:
        return "unknown exit"
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


async def _read_frame(stream: asyncio.StreamReader) -> bytes:
    (n,) = _LEN.unpack(await stream.readexactly(_LEN.size))
    return await stream.readexactly(n)
