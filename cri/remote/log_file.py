"""Reading a container log file in the CRI format a CRI runtime writes:
`<RFC 3339 nanoseconds> <stdout|stderr> <F|P> <text>`, one record per line; P(artial) records join the
next one into one line."""

from __future__ import annotations

import os
from collections import deque


def parse_record(line: bytes) -> tuple[bytes, bool] | None:
    """(text, full) of one record, or None when the line is not a CRI record."""
    parts = line.split(b" ", 3)
    if len(parts) < 3 or parts[1] not in (b"stdout", b"stderr") or parts[2] not in (b"F", b"P"):
        return None
    return (parts[3] if len(parts) == 4 else b""), parts[2] == b"F"


def log_text(data: bytes, tail: int | None = None) -> bytes:
    """The container's output from a CRI log file's content: full lines get their newline back."""
    lines: deque[bytes] = deque(maxlen=tail if tail is not None and tail >= 0 else None)
    partial = b""
    for raw in data.split(b"\n"):
        record = parse_record(raw)
        if record is None:
            continue
        text, full = record
        if full:
            lines.append(partial + text + b"\n")
            partial = b""
        else:
            partial += text
    if tail == 0:
        return b""
    return b"".join(lines) + partial


def read_log(path: str, tail: int | None = None, limit: int = 64 * 1024 * 1024) -> bytes:
    """The text of the log at `path` (rotated files are not read); b"" when there is none."""
    if not path or not os.path.exists(path):
        return b""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            f.seek(size - limit)
            f.readline()  # start at a record boundary
        return log_text(f.read(), tail)
