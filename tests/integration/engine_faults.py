"""The test Docker Engine going away under the agent: `scripts/testenv stop-dockerd` / `start-dockerd` on the
engine of this test run (MKL_TEST_NETNS), containerd and its shims left running, as a crashed or restarted
docker.service leaves them."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

TESTENV = Path(__file__).resolve().parents[2] / "scripts" / "testenv"


def _testenv(*args: str) -> None:
    env = {**os.environ, "MKL_TEST_NETNS": os.environ.get("MKL_TEST_NETNS", "mkltest")}
    done = subprocess.run([str(TESTENV), *args], env=env, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise AssertionError(f"testenv {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")


def stop_dockerd(*, kill: bool = False) -> None:
    """SIGTERM (dockerd stops its containers first unless live-restore is on) or SIGKILL (a crash)."""
    _testenv("stop-dockerd", *(["--kill"] if kill else []))


def start_dockerd(*, live_restore: bool = False) -> None:
    _testenv("start-dockerd", *(["--live-restore"] if live_restore else []))


@contextlib.contextmanager
def live_restore_engine() -> Iterator[None]:
    """The engine restarted with live-restore for the block, and restarted without it afterwards."""
    stop_dockerd()
    start_dockerd(live_restore=True)
    try:
        yield
    finally:
        with contextlib.suppress(AssertionError):
            stop_dockerd()
        start_dockerd()
