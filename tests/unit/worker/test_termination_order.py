"""Termination ordering: regular containers at once, sidecars in reverse start order after them."""

from __future__ import annotations

import asyncio

from minikubelet.worker.termination_order import TerminationOrdering


def test_who_waits_for_whom() -> None:
    o = TerminationOrdering(["proxy", "logger"], ["app", "proxy", "web", "logger"])
    assert o.waits_for("app") == [] and o.waits_for("web") == []
    assert o.waits_for("logger") == ["app", "web"]
    assert o.waits_for("proxy") == ["app", "web", "logger"]


async def test_sidecars_stop_last_in_reverse_order() -> None:
    o = TerminationOrdering(["proxy", "logger"], ["proxy", "logger", "app"])
    stopped: list[str] = []

    async def stop(name: str, work: float) -> None:
        await o.wait_for_turn(name)
        await asyncio.sleep(work)
        stopped.append(name)
        o.container_terminated(name)

    await asyncio.wait_for(asyncio.gather(stop("proxy", 0), stop("logger", 0), stop("app", 0.01)), 2)
    assert stopped == ["app", "logger", "proxy"]


async def test_a_name_with_two_live_instances_is_done_when_both_are() -> None:
    o = TerminationOrdering(["proxy"], ["app", "app", "proxy"])
    turn = asyncio.ensure_future(o.wait_for_turn("proxy"))
    o.container_terminated("app")
    await asyncio.sleep(0)
    assert not turn.done()
    o.container_terminated("app")
    await asyncio.wait_for(turn, 1)
