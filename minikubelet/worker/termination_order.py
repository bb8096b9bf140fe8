"""Termination ordering (upstream kuberuntime terminationOrdering): regular containers stop at once; each
sidecar waits until every regular container and every sidecar started after it has stopped, so sidecars
stop in reverse order of their start."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence


class TerminationOrdering:
    def __init__(self, sidecar_order: Sequence[str], running: Iterable[str]) -> None:
        """`sidecar_order`: the pod's sidecars in spec order; `running`: names of the containers to stop."""
        all_names = list(running)
        names = list(dict.fromkeys(all_names))
        self._remaining = {n: all_names.count(n) for n in names}  # instances of one name still alive
        sidecars = [n for n in sidecar_order if n in names]
        regular = [n for n in names if n not in sidecar_order]
        self._done: dict[str, asyncio.Event] = {n: asyncio.Event() for n in names}
        self._waits_for: dict[str, list[str]] = {n: [] for n in regular}
        for i, n in enumerate(sidecars):
            self._waits_for[n] = regular + sidecars[i + 1:]

    def waits_for(self, name: str) -> list[str]:
        return list(self._waits_for.get(name, []))

    async def wait_for_turn(self, name: str) -> None:
        for other in self._waits_for.get(name, []):
            await self._done[other].wait()

    def container_terminated(self, name: str) -> None:
        if name not in self._remaining:
            return
        self._remaining[name] -= 1
        if self._remaining[name] <= 0:
            self._done[name].set()
