"""Container logs for `GET /containerLogs/{ns}/{pod}/{container}` (upstream `kuberuntime/logs/logs.go`).

The kubelet reads the container's log file itself: the CRI format (`<RFC3339Nano> <stream> <F|P> <text>`,
written by containerd) or, behind cri-dockerd's symlink, Docker's json-file format
(`{"log":…,"stream":…,"time":…}`); the format is told per line. Options as upstream: `tailLines` picks the
start from the end of the file, `sinceSeconds`/`sinceTime` drop older lines, `timestamps` prefixes each line
with its time in the fixed-width RFC3339Nano form, `limitBytes` stops after that many bytes, `follow` waits
for more until the container is no longer running. One write per line (the recorded kubelet sends one
chunk per line).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from minikubelet.base.kubetime import timegm

NANOS = 1_000_000_000
MAX_LINE = 16 * 1024 * 1024  # a json-file record holds at most 16 KiB of text; this bounds a corrupt file
_READ_BLOCK = 64 * 1024
FOLLOW_POLL = 0.25  # seconds between looks at the file while following
STATE_CHECK = 1.0  # seconds between asking whether the container still runs (upstream: on fsnotify, or 5 s)

_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$")
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


class LogOptionsError(ValueError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LogOptions:
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    since_ns: int | None = None  # lines older than this (ns since the epoch) are skipped
    tail_lines: int | None = None
    limit_bytes: int | None = None


def parse_rfc3339_ns(text: str) -> int:
    m = _RFC3339.match(text)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {text[:40]!r}")
    y, mo, d, h, mi, s, frac, zone = m.groups()
    seconds = timegm(int(y), int(mo), int(d), int(h), int(mi), int(s))
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds * NANOS + int((frac or "0").ljust(9, "0"))


def format_timestamp(ns: int) -> str:
    """Go's RFC3339NanoFixed in UTC: always nine fraction digits."""
    seconds, frac = divmod(ns, NANOS)
    y, mo, d, h, mi, s = time.gmtime(seconds)[:6]
    return f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{frac:09d}Z"


def _one(query: Mapping[str, Sequence[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


def _bool(query: Mapping[str, Sequence[str]], key: str) -> bool:
    value = _one(query, key)
    if value is None or value == "":
        return False
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise LogOptionsError(400, '{"message": "Unable to decode query."}')


def _int(query: Mapping[str, Sequence[str]], key: str) -> int | None:
    value = _one(query, key)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise LogOptionsError(400, '{"message": "Unable to decode query."}') from None


def parse_log_options(query: Mapping[str, Sequence[str]], now_ns: int) -> LogOptions:
    """PodLogOptions from the query, with upstream's `tail` alias, decoding (400) and validation (422)."""
    q = dict(query)
    tail = _one(q, "tail")
    if tail:
        q.pop("tailLines", None)
        if tail != "all":
            q["tailLines"] = [tail]
    tail_lines, limit_bytes, since_seconds = _int(q, "tailLines"), _int(q, "limitBytes"), _int(q, "sinceSeconds")
    since_time = _one(q, "sinceTime")
    since_ns: int | None = None
    if since_time:
        try:
            since_ns = parse_rfc3339_ns(since_time)
        except ValueError:
            raise LogOptionsError(400, '{"message": "Unable to decode query."}') from None
    invalid = ((tail_lines is not None and tail_lines < 0) or (limit_bytes is not None and limit_bytes < 1)
               or (since_seconds is not None and (since_seconds < 1 or since_time)))
    if invalid:
        raise LogOptionsError(422, '{"message": "Invalid request."}')
    if since_seconds is not None:
        since_ns = now_ns - since_seconds * NANOS
    return LogOptions(follow=_bool(q, "follow"), previous=_bool(q, "previous"), timestamps=_bool(q, "timestamps"),
                      since_ns=since_ns, tail_lines=tail_lines, limit_bytes=limit_bytes)


@dataclass(frozen=True)
class LogMessage:
    time_ns: int
    stream: str
    text: bytes


def parse_line(line: bytes) -> LogMessage:
    """One line of a log file in either format; raises ValueError."""
    if line.startswith(b"{"):
        record = json.loads(line)
        if not isinstance(record, dict) or not isinstance(record.get("log"), str):
            raise ValueError("not a json-file log record")
        return LogMessage(parse_rfc3339_ns(str(record.get("time", ""))), str(record.get("stream", "")),
                          record["log"].encode("utf-8"))
    parts = line.rstrip(b"\n").split(b" ", 3)
    if len(parts) < 3:
        raise ValueError("not a CRI log line")
    time_ns = parse_rfc3339_ns(parts[0].decode("ascii", "replace"))
    text = parts[3] if len(parts) == 4 else b""
    # A partial line (tag P) continues in the next record; a full one (F) ends with the newline the runtime cut.
    return LogMessage(time_ns, parts[1].decode("ascii", "replace"), text if parts[2] == b"P" else text + b"\n")


def tail_start(f: int, n: int) -> int:
    """Offset of the start of the last n lines of the open file descriptor `f`, read backwards by blocks."""
    size = os.fstat(f).st_size
    if n == 0:
        return size
    pos = size
    newlines = 0
    # A final newline ends the last line rather than starting an empty one.
    if size and os.pread(f, 1, size - 1) == b"\n":
        newlines = -1
    while pos > 0:
        start = max(0, pos - _READ_BLOCK)
        block = os.pread(f, pos - start, start)
        idx = len(block)
        while (idx := block.rfind(b"\n", 0, idx)) != -1:
            newlines += 1
            if newlines == n:
                return start + idx + 1
        pos = start
    return 0


Write = Callable[[bytes], Awaitable[None]]
IsRunning = Callable[[], Awaitable[bool]]


class _Limit(Exception):
    pass


class LogReader:
    """Copies one log file to `write` under `opts`; `is_running` ends a follow."""

    def __init__(self, path: str, opts: LogOptions, write: Write, is_running: IsRunning,
                 poll: float = FOLLOW_POLL, state_check: float = STATE_CHECK) -> None:
        self.path = path
        self.opts = opts
        self._write = write
        self._is_running = is_running
        self._poll = poll
        self._state_check = state_check
        self._left = opts.limit_bytes

    async def copy(self) -> None:
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            pos = tail_start(fd, self.opts.tail_lines) if self.opts.tail_lines is not None else 0
            try:
                await self._copy_from(fd, pos)
            except _Limit:
                return
        finally:
            os.close(fd)

    async def _copy_from(self, fd: int, pos: int) -> None:
        pending = b""
        loop = asyncio.get_running_loop()
        next_check = loop.time() + self._state_check
        while True:
            block = os.pread(fd, _READ_BLOCK, pos)
            if block:
                pos += len(block)
                pending += block
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    await self._emit(line + b"\n")
                if len(pending) > MAX_LINE:
                    pending = b""  # a corrupt file: drop the unterminated run rather than hold it all
                continue
            if not self.opts.follow:
                return
            if loop.time() >= next_check:
                next_check = loop.time() + self._state_check
                if not await self._is_running():
                    # Read once more: the last lines may have landed after the previous read.
                    if os.fstat(fd).st_size > pos:
                        continue
                    return
            rotated = self._rotated(fd)
            if rotated is not None and os.fstat(fd).st_size > pos:
                # The old file's last lines, written before the runtime reopened its log: read them first.
                os.close(rotated)
                continue
            if rotated is not None:
                os.dup2(rotated, fd)
                os.close(rotated)
                pos = 0
                pending = b""
                continue
            await asyncio.sleep(self._poll)

    def _rotated(self, fd: int) -> int | None:
        """A new file at our path (Docker's json-file rotation renames the old one away): its descriptor."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        mine = os.fstat(fd)
        if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
            return None
        return os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)

    async def _emit(self, line: bytes) -> None:
        try:
            msg = parse_line(line)
        except ValueError:
            return  # upstream logs and skips a line it cannot parse
        if self.opts.since_ns is not None and msg.time_ns < self.opts.since_ns:
            return
        out = msg.text
        if self.opts.timestamps:
            out = format_timestamp(msg.time_ns).encode() + b" " + out
        if self._left is not None:
            if self._left <= 0:
                raise _Limit
            out = out[: self._left]
            self._left -= len(out)
        await self._write(out)
        if self._left is not None and self._left <= 0:
            raise _Limit
