"""tcpSocket probes: success when a TCP connection opens within the timeout."""

from __future__ import annotations

import asyncio
import os
import socket
import struct

from probes.addresses import join_host_port
from probes.result import ProbeOutcome, Result

# SO_LINGER {on, 0 s}: close with RST so frequent probes leave no TIME_WAIT sockets behind.
_LINGER_RESET = struct.pack("ii", 1, 0)


async def probe_tcp(host: str, port: int, timeout_s: float) -> ProbeOutcome:
    address = join_host_port(host, port)
    try:
        async with asyncio.timeout(timeout_s):
            _reader, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return ProbeOutcome(Result.FAILURE, f"dial tcp {address}: i/o timeout")
    except OSError as err:
        return ProbeOutcome(Result.FAILURE, f"dial tcp {address}: connect: {describe_os_error(err)}")
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass  # The peer closing first is still an open port.
    return ProbeOutcome(Result.SUCCESS, "")


def describe_os_error(err: OSError) -> str:
    if err.errno:
        return os.strerror(err.errno).lower()
    return str(err) or type(err).__name__
