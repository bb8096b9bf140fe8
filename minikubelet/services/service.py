"""The protocol every node service keeps, and the group that starts them in order and stops them in reverse.

Shaped like controller-runtime's Manager and its Runnables: a service does its one-time set-up in `start`, names
the loops that run for the agent's life in `loops`, and releases what it holds in `stop`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

log = logging.getLogger("minikubelet.services")

Loop = tuple[str, Callable[[], Coroutine[Any, Any, None]]]


class NodeService(Protocol):
    name: str

    async def start(self) -> None:
        """One-time set-up, in the agent's start-up order (after every service before it has started)."""

    def loops(self) -> Sequence[Loop]:
        """The loops that run until the agent stops, each as (task name, coroutine function)."""

    async def stop(self) -> None:
        """Release what the service holds; called in reverse start order, also after a failed start."""


class Service:
    """No set-up, no loops, nothing to release: a base for the services that need only some of the three."""

    name = "service"

    async def start(self) -> None:
        return None

    def loops(self) -> Sequence[Loop]:
        return ()

    async def stop(self) -> None:
        return None


class ServiceGroup:
    """Starts services one by one, runs all their loops under one TaskGroup, stops the started ones in reverse."""

    def __init__(self) -> None:
        self.started: list[NodeService] = []

    async def start(self, *services: NodeService) -> None:
        for service in services:
            self.started.append(service)  # stopped even if its own start fails half-way
            await service.start()

    async def run(self, stop: asyncio.Event, on_stop: Callable[[], None] = lambda: None) -> None:
        """Every started service's loops until `stop` is set, by SIGTERM or SIGINT too (or until one of the loops
        fails: the TaskGroup raises)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(run(), name=name) for s in self.started for name, run in s.loops()]
                await stop.wait()
                on_stop()
                for t in tasks:
                    t.cancel()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)

    async def stop(self) -> None:
        while self.started:
            service = self.started.pop()
            try:
                await service.stop()
            except Exception:  # one service's failure to stop must not keep the others from stopping
                log.exception("stopping a node service failed", extra={"kv": {"service": service.name}})
