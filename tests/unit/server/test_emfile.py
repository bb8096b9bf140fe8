"""Out of descriptors, the bounded listener pauses accept() with one log line and recovers."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import aiohttp
import pytest

REPO = Path(__file__).resolve().parents[3]
CLIENTS = 60


async def _answers(port: int, scheme: str) -> bool:
    try:
        async with (aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as c,
                    c.get(f"{scheme}://127.0.0.1:{port}/") as r):
            return r.status == 200
    except aiohttp.ClientError:
        return False


@pytest.mark.parametrize("listener", ["tls", "h11"])
async def test_accept_out_of_descriptors_logs_one_line_and_service_resumes(listener: str, tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.unit.server.emfile_server", listener, str(tmp_path), cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        port = int(await proc.stdout.readline())
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(CLIENTS)]
        await asyncio.sleep(1.5)  # the server accepts a few, then runs out of descriptors
        for _, writer in held:
            writer.close()
        async with asyncio.timeout(20):
            while True:
                if await _answers(port, "https" if listener == "tls" else "http"):
                    break
                await asyncio.sleep(0.2)
        assert proc.returncode is None
    finally:
        proc.terminate()
        _, err_bytes = await proc.communicate()
    err = err_bytes.decode()
    lines = err.splitlines()
    assert sum("accept() out of descriptors" in line for line in lines) == 1, err[-3000:]
    assert "Traceback" not in err
    assert len(lines) <= 5, err[-3000:]
