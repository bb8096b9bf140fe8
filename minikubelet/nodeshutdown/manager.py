"""The node shutdown manager (upstream nodeshutdown_manager_linux.go).

It holds a logind delay inhibitor while the node runs. On `PrepareForShutdown(true)` the node turns not ready,
new pods are refused, and the pods are killed group by group (lowest priority first), each group within its
share of the grace; then the lock is released and the shutdown goes on. `PrepareForShutdown(false)` (cancelled)
takes the lock again. A lost bus connection is re-made every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from minikubelet.base import podview
from minikubelet.base.clock import Clock, sleep_until_woken
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import ShutdownGracePeriodByPodPriority
from minikubelet.events import EXCEEDED_GRACE_PERIOD
from minikubelet.nodeshutdown.groups import (
    NODE_SHUTTING_DOWN,
    NOT_ADMITTED_MESSAGE,
    NOT_ADMITTED_REASON,
    group_by_priority,
    period_requested,
    pod_grace,
    shutdown_status_fn,
)
from minikubelet.nodeshutdown.logind import Logind, LogindError
from minikubelet.nodeshutdown.state import ShutdownState
from minikubelet.pod.admission import ADMIT, PodAdmitResult
from minikubelet.worker.lifecycle import PodStatusFn, kill_timeout

log = logging.getLogger("minikubelet.nodeshutdown")

NODE_SHUTDOWN_EVENT = "NodeShutdown"
DBUS_RECONNECT_PERIOD = 1.0
# upstream polls logind after its reload: 100 ms doubling, 5 attempts
RELOAD_POLL_FIRST = 0.1
RELOAD_POLL_STEPS = 5
STATUS_POLL = 0.1

KillPod = Callable[[Pod, int, PodStatusFn], asyncio.Event]
"""Kill a pod with a grace and a terminal status; the event is set once nothing of it runs."""


def _err(e: BaseException) -> str:
    return str(e) or type(e).__name__


async def _set_when_done(kills: Sequence[asyncio.Future[None]], done: asyncio.Event) -> None:
    await asyncio.gather(*kills, return_exceptions=True)
    done.set()


class NodeShutdownManager:
    def __init__(self, periods: Sequence[ShutdownGracePeriodByPodPriority], clock: Clock,
                 active_pods: Callable[[], list[Pod]], kill_pod: KillPod,
                 node_event: Callable[[str, str, str], None], pod_event: Callable[[Pod, str, str, str], None],
                 sync_node_status: Callable[[], None], connect: Callable[[], Awaitable[Logind]],
                 statuses_written: Callable[[Sequence[Pod]], bool] = lambda _pods: True,
                 state: ShutdownState | None = None) -> None:
        self.periods = list(periods)
        self.clock = clock
        self.active_pods = active_pods
        self.kill_pod = kill_pod
        self.node_event = node_event
        self.pod_event = pod_event
        self.sync_node_status = sync_node_status
        self.connect = connect
        self.statuses_written = statuses_written
        self.state = state  # the start and end times' record and gauges
        self.shutting_down = False
        self.logind: Logind | None = None
        self.lock: int | None = None
        self.processed = asyncio.Event()  # set after each processed shutdown (the lock released)
        self._waiters: set[asyncio.Future[None]] = set()

    # --- what the rest of the kubelet asks --------------------------------------------------
    def admit(self, pod: Pod, admitted: Sequence[Pod]) -> PodAdmitResult:
        if self.shutting_down:
            return PodAdmitResult(False, NOT_ADMITTED_REASON, NOT_ADMITTED_MESSAGE)
        return ADMIT

    def errors(self) -> tuple[str, ...]:
        """For the node's Ready condition (upstream ShutdownStatus)."""
        return (NODE_SHUTTING_DOWN,) if self.shutting_down else ()

    # --- the watch --------------------------------------------------------------------------
    async def run(self) -> None:
        log.info("Creating node shutdown manager", extra={"kv": {
            "shutdownGracePeriodRequested": f"{period_requested(self.periods)}s",
            "shutdownGracePeriodByPodPriority": [(p.priority, p.grace_seconds) for p in self.periods]}})
        try:
            events = await self._start()
        except Exception as e:  # any failure of the bus or logind: never the agent's
            # as upstream: not critical for the kubelet, which goes on without it
            log.error("Failed to start node shutdown manager", extra={"kv": {"err": _err(e)}})
            self._close()
            return
        while True:
            try:
                await self._watch(events)
            except Exception as e:
                log.error("watching the node for shutdown events failed", extra={"kv": {"err": _err(e)}})
            finally:
                self._close()
            events = await self._restart()

    async def _restart(self) -> asyncio.Queue[bool]:
        while True:
            await self.clock.sleep(DBUS_RECONNECT_PERIOD)
            log.info("Restarting watch for node shutdown events")
            try:
                return await self._start()
            except Exception as e:
                log.error("Unable to watch the node for shutdown events", extra={"kv": {"err": _err(e)}})
                self._close()

    async def _start(self) -> asyncio.Queue[bool]:
        self.logind = logind = await self.connect()
        current = await logind.current_inhibit_delay()
        requested = period_requested(self.periods)
        if requested > current:
            path = logind.override_inhibit_delay(requested)
            await logind.reload_logind_conf()
            log.info("raised logind's InhibitDelayMaxSec", extra={"kv": {"dropIn": path, "seconds": requested}})
            delay, attempt = RELOAD_POLL_FIRST, 0
            while attempt < RELOAD_POLL_STEPS:
                await self.clock.sleep(delay)
                attempt += 1
                current = await logind.current_inhibit_delay()
                if current >= requested:
                    break
                delay *= 2
            else:
                raise LogindError(
                    f"node shutdown manager was timed out after {attempt} attempts waiting for logind "
                    f"InhibitDelayMaxSec to update to {requested}s (ShutdownGracePeriod), current value is "
                    f"{current:g}s")
        await self._acquire_lock()
        try:
            return await logind.monitor_shutdown()
        except BaseException:
            self._release_lock()
            raise

    async def _watch(self, events: asyncio.Queue[bool]) -> None:
        assert self.logind is not None
        lost = asyncio.ensure_future(self.logind.wait_for_disconnect())
        getter: asyncio.Future[bool] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(events.get())
                await asyncio.wait({getter, lost}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    log.error("Ended to watching the node for shutdown events")
                    return
                shutting_down = getter.result()
                log.info("Shutdown manager detected new shutdown event",
                         extra={"kv": {"event": "shutdown" if shutting_down else "cancelled"}})
                self.node_event("Normal", NODE_SHUTDOWN_EVENT, "Shutdown manager detected shutdown event"
                                if shutting_down else "Shutdown manager detected shutdown cancellation")
                self.shutting_down = shutting_down
                if shutting_down:
                    self.sync_node_status()
                    await self.process_shutdown()
                else:
                    with contextlib.suppress(OSError, LogindError):
                        await self._acquire_lock()
        finally:
            for f in (lost, getter):
                if f is not None and not f.done():
                    f.cancel()
                    with contextlib.suppress(BaseException):
                        await f

    async def _acquire_lock(self) -> None:
        assert self.logind is not None
        lock = await self.logind.inhibit_shutdown()
        self._release_lock()
        self.lock = lock

    def _release_lock(self) -> None:
        if self.lock is not None:
            lock, self.lock = self.lock, None
            with contextlib.suppress(OSError):
                Logind.release(lock)

    def _close(self) -> None:
        self._release_lock()
        if self.logind is not None:
            with contextlib.suppress(Exception):
                self.logind.close()
            self.logind = None

    # --- the shutdown itself -----------------------------------------------------------------
    async def process_shutdown(self) -> None:
        log.info("Shutdown manager processing shutdown event")
        started = self.clock.monotonic()
        wall_start = self.clock.now()
        if self.state is not None:
            self.state.started(wall_start)
        try:
            pods = self.active_pods()
            await self.kill_pods(pods)
            if self.state is not None:
                self.state.ended(wall_start, self.clock.now())
            # The machine goes down soon after the lock is released: give the pods' final statuses what is left
            # of the grace to reach the API server, or they would run again after the boot.
            deadline = started + period_requested(self.periods)
            while not self.statuses_written(pods) and self.clock.monotonic() < deadline:
                await self.clock.sleep(STATUS_POLL)
            if not self.statuses_written(pods):
                log.warning("pod statuses not all written to the API server before the shutdown")
        finally:
            self._release_lock()
            log.info("Shutdown manager completed processing shutdown event, node will shutdown shortly")
            self.processed.set()

    async def kill_pods(self, pods: list[Pod]) -> None:
        """Group by group, lowest priority first; the next group starts when every pod of this one has
        stopped or the group's grace has passed, whichever comes first."""
        for group in group_by_priority(self.periods, pods):
            if not group.pods:
                continue
            kills = [asyncio.ensure_future(self._kill(pod, pod_grace(pod, group.grace_seconds)))
                     for pod in group.pods]
            all_done = asyncio.Event()
            waiter = asyncio.ensure_future(_set_when_done(kills, all_done))
            self._waiters.add(waiter)  # a group that overran its grace goes on stopping in the background
            waiter.add_done_callback(self._waiters.discard)
            await sleep_until_woken(self.clock, group.grace_seconds, all_done)
            if all_done.is_set():
                log.info("Done waiting for all pods in group to terminate",
                         extra={"kv": {"gracePeriod": group.grace_seconds, "priority": group.priority}})
            else:
                log.info("Shutdown manager pod killing time out",
                         extra={"kv": {"gracePeriod": group.grace_seconds, "priority": group.priority}})

    async def _kill(self, pod: Pod, grace: int) -> None:
        """upstream killPodNow: wait up to 1.5 times the grace (at least 10 s) for the pod to stop."""
        log.info("Shutdown manager killing pod with gracePeriod",
                 extra={"kv": {"pod": podview.format_pod(pod), "gracePeriod": grace}})
        done = self.kill_pod(pod, grace, shutdown_status_fn(pod, rfc3339(self.clock.now())))
        await sleep_until_woken(self.clock, kill_timeout(grace), done)
        if done.is_set():
            log.info("Shutdown manager finished killing pod", extra={"kv": {"pod": podview.format_pod(pod)}})
        else:
            self.pod_event(pod, "Warning", EXCEEDED_GRACE_PERIOD,
                           "Container runtime did not kill the pod within specified grace period.")
            log.info("Shutdown manager failed killing pod",
                     extra={"kv": {"pod": podview.format_pod(pod), "err": "timeout waiting to kill pod"}})
