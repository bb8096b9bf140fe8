"""Clients of ours against the test API server, and waiting on real I/O while a FakeClock holds time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from minikubelet.base.clock import Clock, FakeClock, RealClock
from minikubelet.kubeapi.kubeconfig import load_kubeconfig
from minikubelet.kubeapi.rest import RestClient, RetryPolicy
from tests.apiserver import ApiServer
from tests.apiserver.client import Identity

T = TypeVar("T")


def client_for(api: ApiServer, identity: Identity, tmp_path: Path, clock: Clock | None = None,
               **kwargs: object) -> RestClient:
    path = api.write_kubeconfig(tmp_path / f"{identity.name.replace(':', '_')}.conf", identity)
    kwargs.setdefault("retry", RetryPolicy(attempts=3, base=0.01, cap=0.05))
    return RestClient(load_kubeconfig(str(path)), clock or RealClock(), **kwargs)  # type: ignore[arg-type]


async def eventually(check: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def drive(clock: FakeClock, awaitable: Awaitable[T], step: float = 0.1, timeout: float = 10.0) -> T:
    """Await `awaitable` while moving `clock` on in steps, so its backoff sleeps end."""
    task = asyncio.ensure_future(awaitable)
    deadline = time.monotonic() + timeout
    while not task.done():
        if time.monotonic() > deadline:
            task.cancel()
            raise AssertionError("timed out driving the fake clock")
        await asyncio.sleep(0.005)
        clock.advance(step)
    return task.result()
