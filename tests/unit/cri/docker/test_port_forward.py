"""The in-process `nsenter`: a socket made in another network namespace from a thread of its own. Run against the
test process's own namespace (a pod's needs a container: tests/integration/test_agent_port_forward.py)."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import socket

import pytest

from cri.docker.port_forward import CLONE_NEWNET, connect_in_netns, on_fresh_thread, socket_in_netns
from cri.streaming import PortForwardError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="setns(2) needs CAP_SYS_ADMIN")
OWN = "/proc/self/ns/net"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_connects_and_carries_bytes() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.read(100))
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    try:
        reader, writer = await connect_in_netns(OWN, server.sockets[0].getsockname()[1], "sb")
        writer.write(b"ping")
        assert await reader.read() == b"ping"
        writer.close()
        await writer.wait_closed()
    finally:
        server.close()
        await server.wait_closed()


async def test_refused_gives_the_dial_errors() -> None:
    port = closed_port()
    with pytest.raises(PortForwardError) as info:
        await connect_in_netns(OWN, port, "sb")
    assert str(info.value).startswith(
        f'failed to connect to localhost:{port} inside namespace "sb", IPv4: dial tcp4 127.0.0.1:{port}: '
        f"connect: connection refused IPv6 dial tcp6 [::1]:{port}: connect: ")


async def test_a_gone_namespace_is_named() -> None:
    with pytest.raises(PortForwardError, match=r"^network namespace of sandbox sb is gone$"):
        await connect_in_netns("/proc/0/ns/net", 80, "sb")


def new_netns() -> int:
    """An fd of a fresh, empty network namespace (made by a thread that then ends)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    assert libc.unshare(CLONE_NEWNET) == 0, os.strerror(ctypes.get_errno())
    return os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)


async def test_the_socket_lives_in_the_other_namespace_and_the_thread_comes_back() -> None:
    fd = await on_fresh_thread(new_netns)
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    try:
        path = f"/proc/self/fd/{fd}"

        def make_and_look() -> tuple[int, int]:
            sock = socket_in_netns(path, socket.AF_INET)
            sock.close()
            return os.stat("/proc/thread-self/ns/net").st_ino, os.fstat(fd).st_ino

        after, other = await on_fresh_thread(make_and_look)
        assert after == os.stat(OWN).st_ino != other
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(PortForwardError, match="network is unreachable"):  # lo is down in a new namespace
            await connect_in_netns(path, port, "sb")
        _, writer = await connect_in_netns(OWN, port, "sb")
        writer.close()
    finally:
        os.close(fd)
        server.close()
        await server.wait_closed()
