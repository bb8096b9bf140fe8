"""Port-forward through Docker: a TCP connection to `localhost:<port>` made from inside the sandbox's network
namespace, which cri-dockerd does with `nsenter -t <pid> -n socat - TCP4:localhost:<port>`.

Here it is done in-process: a short-lived thread enters the namespace (`setns(2)`; Python 3.11 has no
`os.setns`), creates the socket and returns to the agent's namespace. A socket keeps the namespace it was created
in, so the connect and all the traffic then run on the event loop like any other socket. The thread is a fresh
one each time, so a thread that failed to switch back can never serve anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

from cri.streaming import PortForwardError

CLONE_NEWNET = 0x40000000
CONNECT_TIMEOUT = 10.0

T = TypeVar("T")

_libc: ctypes.CDLL | None = None


def _setns(fd: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def socket_in_netns(netns_path: str, family: int) -> socket.socket:
    """A TCP socket created in the network namespace at `netns_path` (e.g. /proc/<pid>/ns/net). Call it on a
    thread of its own: it switches that thread's namespace and back."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            return socket.socket(family, socket.SOCK_STREAM)
        finally:
            _setns(own)
    finally:
        os.close(own)


async def on_fresh_thread(fn: Callable[[], T]) -> T:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def deliver(result: T | None, exc: BaseException | None) -> None:
        if done.cancelled():
            if isinstance(result, socket.socket):
                result.close()
            return
        if exc is not None:
            done.set_exception(exc)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result = fn()
        except BaseException as exc:
            loop.call_soon_threadsafe(deliver, None, exc)
            return
        loop.call_soon_threadsafe(deliver, result, None)

    threading.Thread(target=run, name="netns-socket", daemon=True).start()
    return await done


def _go_error(family: int, port: int, exc: OSError) -> str:
    """Go's `dial` error text, as containerd's port-forward reports it (`connect: connection refused`)."""
    host = "127.0.0.1" if family == socket.AF_INET else "[::1]"
    net = "tcp4" if family == socket.AF_INET else "tcp6"
    if isinstance(exc, TimeoutError):
        reason = "i/o timeout"
    else:
        text = os.strerror(exc.errno) if exc.errno else str(exc)
        reason = "connect: " + text[:1].lower() + text[1:]
    return f"dial {net} {host}:{port}: {reason}"


async def connect_in_netns(netns_path: str, port: int, label: str, timeout: float = CONNECT_TIMEOUT
                           ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """localhost:port inside the namespace, IPv4 first then IPv6 (as containerd); `label` names the sandbox in
    the error text."""
    loop = asyncio.get_running_loop()
    errors: list[str] = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            sock = await on_fresh_thread(functools.partial(socket_in_netns, netns_path, family))
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ESRCH):
                raise PortForwardError(f"network namespace of sandbox {label} is gone") from None
            errors.append(_go_error(family, port, exc))
            continue
        sock.setblocking(False)
        try:
            async with asyncio.timeout(timeout):
                await loop.sock_connect(sock, (host, port))
        except OSError as exc:
            sock.close()
            errors.append(_go_error(family, port, exc))
            continue
        except BaseException:
            sock.close()
            raise
        try:
            return await asyncio.open_connection(sock=sock)
        except BaseException:
            with contextlib.suppress(OSError):
                sock.close()
            raise
    raise PortForwardError(f"failed to connect to localhost:{port} inside namespace \"{label}\", "
                           f"IPv4: {errors[0]} IPv6 {errors[-1]} ")
