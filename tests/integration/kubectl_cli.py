"""The host's real `kubectl`, run against the test API server with an admin kubeconfig."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

# kubectl before kubernetes/kubernetes#131203 (the fix of #131189; this host has 1.32) starts reading the WebSocket
# before it has made its streams, so the server's first message, the empty one that says the streams are up (as
# upstream's), can come too early and be logged and dropped. It carries no data: the output is still compared whole.
_DEMUX_RACE = re.compile(r"^E\d{4} [\d:.]+ +\d+ websocket\.go:\d+\] Unknown stream id \d, discarding message\n",
                         re.MULTILINE)


def without_demux_race(stderr: str) -> str:
    return _DEMUX_RACE.sub("", stderr)


async def kubectl(kubeconfig: Path, cache: Path, *args: str, stdin: bytes | None = None,
                  cwd: Path | None = None) -> tuple[int, str, str]:
    """Exit code, stdout and stderr. Run asynchronously: the test API server answers from this very event loop."""
    proc = await asyncio.create_subprocess_exec(
        "kubectl", f"--kubeconfig={kubeconfig}", f"--cache-dir={cache}", "--request-timeout=20s", *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=cwd)
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    return proc.returncode or 0, out.decode(), without_demux_race(err.decode())
