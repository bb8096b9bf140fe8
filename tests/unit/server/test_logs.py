"""Log reading in every mode against what the recorded kubelet sent (`logs-timestamps`: one chunk per line)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from minikubelet.server.logs import (
    LogOptions,
    LogOptionsError,
    LogReader,
    format_timestamp,
    parse_log_options,
    parse_rfc3339_ns,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "kubernetes" / "kubelet-api"


def recorded_chunks(scenario: str) -> list[bytes]:
    raw = (FIXTURES / scenario / "s2c.bin").read_bytes()
    body = raw.split(b"\r\n\r\n", 1)[1]
    chunks: list[bytes] = []
    while True:
        size_line, body = body.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            return chunks
        chunks.append(body[:size])
        body = body[size + 2:]


LINES = recorded_chunks("logs-timestamps")  # b"<RFC3339NanoFixed> logger line N\n"


def cri_file(tmp_path: Path) -> Path:
    path = tmp_path / "0.log"
    path.write_bytes(b"".join(ts + b" stdout F " + text for ts, _, text in (c.partition(b" ") for c in LINES)))
    return path


def docker_file(tmp_path: Path) -> Path:
    path = tmp_path / "json.log"
    records = []
    for chunk in LINES:
        ts, _, text = chunk.partition(b" ")
        # Docker trims trailing zeros of the fraction (RFC3339Nano); the output must still be fixed-width.
        records.append(json.dumps({"log": text.decode(), "stream": "stdout",
                                   "time": ts.decode().rstrip("Z").rstrip("0") + "Z"}).encode() + b"\n")
    path.write_bytes(b"".join(records))
    return path


async def read(path: Path, opts: LogOptions, running: bool = False) -> list[bytes]:
    out: list[bytes] = []

    async def write(data: bytes) -> None:
        out.append(data)

    async def is_running() -> bool:
        return running

    await LogReader(str(path), opts, write, is_running, poll=0.01, state_check=0.01).copy()
    return out


@pytest.mark.parametrize("make", [cri_file, docker_file])
async def test_timestamps_reproduce_the_recorded_chunks(tmp_path: Path, make: object) -> None:
    assert callable(make)
    assert await read(make(tmp_path), LogOptions(timestamps=True)) == LINES


@pytest.mark.parametrize("make", [cri_file, docker_file])
async def test_plain_tail_since_and_limit(tmp_path: Path, make: object) -> None:
    assert callable(make)
    path = make(tmp_path)
    texts = [c.partition(b" ")[2] for c in LINES]
    assert await read(path, LogOptions()) == texts
    assert await read(path, LogOptions(tail_lines=2)) == texts[-2:]
    assert await read(path, LogOptions(tail_lines=0)) == []
    assert await read(path, LogOptions(tail_lines=1000)) == texts
    since = parse_rfc3339_ns(LINES[7].partition(b" ")[0].decode())
    assert await read(path, LogOptions(since_ns=since)) == texts[7:]
    assert b"".join(await read(path, LogOptions(limit_bytes=20))) == b"".join(texts)[:20]


async def test_follow_ends_once_the_container_stopped_and_reads_the_rest(tmp_path: Path) -> None:
    path = cri_file(tmp_path)
    assert len(await read(path, LogOptions(follow=True), running=False)) == len(LINES)


async def test_follow_reads_on_across_rotations(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    stamp = b"2026-11-22T22:46:37.036219043Z stdout F "
    path.write_bytes(stamp + b"1\n")
    out: list[bytes] = []
    running = True

    async def write(data: bytes) -> None:
        out.append(data)

    async def is_running() -> bool:
        return running

    reader = asyncio.create_task(LogReader(str(path), LogOptions(follow=True), write, is_running, poll=0.01,
                                           state_check=0.05).copy())
    n = 1
    for rotation in range(3):
        await asyncio.sleep(0.05)
        with open(path, "ab") as old:
            os.rename(path, f"{path}.{rotation}")  # the kubelet renames; the runtime writes on until it reopens
            n += 1
            old.write(stamp + str(n).encode() + b"\n")
            old.flush()
            await asyncio.sleep(0.05)
            n += 1
            old.write(stamp + str(n).encode() + b"\n")
        n += 1
        path.write_bytes(stamp + str(n).encode() + b"\n")  # ReopenContainerLog: a new file at the path
    await asyncio.sleep(0.05)
    running = False
    await asyncio.wait_for(reader, 5)
    assert out == [str(i).encode() + b"\n" for i in range(1, n + 1)]


async def test_partial_cri_lines_are_joined() -> None:
    from minikubelet.server.logs import parse_line
    assert parse_line(b"2026-11-22T22:46:37.036219043Z stdout P abc\n").text == b"abc"
    assert parse_line(b"2026-11-22T22:46:37.036219043Z stderr F def\n").text == b"def\n"
    assert format_timestamp(parse_rfc3339_ns("2026-11-22T22:46:37.5+01:00")) == "2026-11-22T21:46:37.500000000Z"


def test_options_decoding_and_validation() -> None:
    q = {"follow": ["true"], "tailLines": ["2"], "timestamps": ["1"], "limitBytes": ["10"], "previous": ["false"]}
    assert parse_log_options(q, 0) == LogOptions(follow=True, timestamps=True, tail_lines=2, limit_bytes=10)
    assert parse_log_options({"sinceSeconds": ["5"]}, 10 * 10**9).since_ns == 5 * 10**9
    assert parse_log_options({"tail": ["all"], "tailLines": ["3"]}, 0).tail_lines is None
    for bad, status in (({"tailLines": ["x"]}, 400), ({"follow": ["yes"]}, 400), ({"tailLines": ["-1"]}, 422),
                        ({"sinceSeconds": ["0"]}, 422), ({"sinceSeconds": ["1"], "sinceTime": ["2026-01-01T00:00:00Z"]}, 422)):
        with pytest.raises(LogOptionsError) as err:
            parse_log_options(bad, 0)
        assert err.value.status == status
