"""Graceful node shutdown for the simulator: the real node shutdown manager (its admit handler, its priority
groups, its kill through the pod workers) processing a shutdown logind announced, then the machine goes down and
the agent starts again. logind itself is not simulated: a `shutdown` event does what its PrepareForShutdown
signal does (the manager's `shutting_down`, then `process_shutdown`).

Invariant `shutdown-order`: a pod of a higher priority group is asked to stop only once every pod of each lower
group has stopped or that group's grace has passed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from minikubelet.base import podview
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import ShutdownGracePeriodByPodPriority
from minikubelet.events import EventRecorder
from minikubelet.nodeshutdown.groups import group_by_priority
from minikubelet.nodeshutdown.logind import Logind
from minikubelet.nodeshutdown.manager import NodeShutdownManager
from minikubelet.services.node_shutdown import shutdown_kill
from minikubelet.worker.lifecycle import PodLifecycle, PodStatusFn
from minikubelet.worker.workers import PodWorkers
from tests.sim.invariants import Violation

PERIODS = (ShutdownGracePeriodByPodPriority(0, 10), ShutdownGracePeriodByPodPriority(1000, 20))
SLACK = 1e-6


@dataclass
class _Group:
    priority: int
    grace: float
    started: float | None = None
    pending: set[str] = field(default_factory=set)  # uids asked to stop, not stopped yet
    members: set[str] = field(default_factory=set)  # its pods when the shutdown began


@dataclass
class ShutdownOrder:
    """What the shutdown asked, group by group, for `shutdown-order`."""

    clock: FakeClock
    groups: list[_Group] = field(default_factory=list)
    killed: set[str] = field(default_factory=set)
    violation: Violation | None = None

    def begin(self, pods: Sequence[Pod]) -> dict[str, int]:
        """The pods' groups as the manager will form them: uid -> group index."""
        formed = group_by_priority(PERIODS, pods)
        self.groups = [_Group(g.priority, g.grace_seconds, members={podview.uid(p) for p in g.pods}) for g in formed]
        return {podview.uid(p): i for i, g in enumerate(formed) for p in g.pods}

    def kill(self, index: int, uid: str) -> None:
        now = self.clock.monotonic()
        group = self.groups[index]
        if group.started is None:
            group.started = now
        for lower in self.groups[:index]:
            if lower.members and (lower.started is None or (
                    lower.pending and now < lower.started + lower.grace - SLACK)):
                self.violation = self.violation or Violation(
                    "shutdown-order", f"pod {uid} (priority group {group.priority}) asked to stop at {now:.1f} while "
                                      f"group {lower.priority} was not asked to stop, or {sorted(lower.pending)} of it still "
                                      f"run within its grace")
        group.pending.add(uid)
        self.killed.add(uid)

    def stopped(self, index: int, uid: str) -> None:
        self.groups[index].pending.discard(uid)


def shutdown_manager(clock: FakeClock, recorder: EventRecorder, workers: PodWorkers,
                     order: ShutdownOrder) -> tuple[NodeShutdownManager, dict[str, int]]:
    """As services/node_shutdown.py builds it (its pods: those whose workers have not terminated them)."""
    groups: dict[str, int] = {}
    agent_kill = shutdown_kill(workers)

    def shutdown_pods() -> list[Pod]:
        pods = [w.pod for uid in workers.uids()
                if (w := workers.get(uid)) is not None and w.lifecycle is not PodLifecycle.TERMINATED]
        groups.clear()
        groups.update(order.begin(pods))
        return pods

    def kill(pod: Pod, grace: int, status_fn: PodStatusFn) -> asyncio.Event:
        uid = podview.uid(pod)
        index = groups.get(uid, 0)
        order.kill(index, uid)
        done = agent_kill(pod, grace, status_fn)

        async def watch() -> None:
            await done.wait()
            order.stopped(index, uid)

        asyncio.get_running_loop().create_task(watch(), name="shutdown-watch")
        return done

    async def no_logind() -> Logind:
        raise OSError("no system bus in the simulation")

    manager = NodeShutdownManager(list(PERIODS), clock, shutdown_pods, kill, recorder.node_event, recorder.pod_event,
                                  lambda: None, no_logind)
    return manager, groups
