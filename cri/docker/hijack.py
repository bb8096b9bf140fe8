"""A hijacked Engine connection (exec start, attach): after the 101 (or 200) answer the socket carries
the process's stdio. Without a tty output comes in frames, each an 8-byte header (stream id, three zero
bytes, big-endian length) and its payload; with a tty it is one raw byte stream (stdout)."""

from __future__ import annotations

import asyncio
import contextlib

from cri.docker.connection import READ_SIZE

STDOUT = 1
STDERR = 2
FRAME_HEADER = 8


class RawStream:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tty: bool, head: bytes) -> None:
        """`head`: output bytes that arrived with the HTTP answer, ahead of the socket's."""
        self._reader = reader
        self._writer = writer
        self._tty = tty
        self._buf = bytearray(head)
        self._frame_stream = STDOUT
        self._frame_left = 0  # payload bytes of the current frame not yet returned

    async def _fill(self, n: int) -> bool:
        """At least `n` bytes buffered; False at EOF (a partial frame at EOF is dropped, as Docker's own client does)."""
        while len(self._buf) < n:
            chunk = await self._reader.read(READ_SIZE)
            if not chunk:
                return False
            self._buf.extend(chunk)
        return True

    def _take(self, n: int) -> bytes:
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    async def read(self) -> tuple[int, bytes] | None:
        """The next output chunk as (STDOUT|STDERR, data), at most READ_SIZE bytes; None at the end."""
        if self._tty:
            if not self._buf and not await self._fill(1):
                return None
            return STDOUT, self._take(READ_SIZE)
        while self._frame_left == 0:
            if not await self._fill(FRAME_HEADER):
                return None
            header = self._take(FRAME_HEADER)
            self._frame_stream = STDERR if header[0] == STDERR else STDOUT
            self._frame_left = int.from_bytes(header[4:8], "big")
        # A large frame is handed out in pieces, so one read never holds more than READ_SIZE.
        if not self._buf and not await self._fill(1):
            return None
        data = self._take(min(self._frame_left, READ_SIZE))
        self._frame_left -= len(data)
        return self._frame_stream, data

    async def write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    def write_eof(self) -> None:
        """Half-close: the process sees stdin end while its output keeps coming."""
        if self._writer.can_write_eof() and not self._writer.is_closing():
            self._writer.write_eof()

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
