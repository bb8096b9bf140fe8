"""Node pressure for the simulator: the real eviction manager (thresholds, ranking, node-level reclaim, its admit
handler) reading a Summary the simulation scripts. Every container the runtime holds uses memory (while it runs),
disk (its writable layer and logs, until it is removed) and PIDs (while it runs); a `pressure` event sets what
the rest of the machine uses of one of them, near or past a threshold, or gives it all back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cri.types import ContainerState
from minikubelet.base import podview
from minikubelet.base.clock import FakeClock
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Pod
from minikubelet.events import EventRecorder
from minikubelet.eviction.manager import EvictionManager, Settings
from minikubelet.eviction.thresholds import MEMORY_AVAILABLE, NODEFS_AVAILABLE, PID_AVAILABLE, parse_thresholds
from minikubelet.worker.gc import ContainerGC
from minikubelet.worker.lifecycle import KillPodOptions, PodLifecycle, PodStatusFn
from minikubelet.worker.workers import PodWorkers
from tests.sim.invariants import SimRuntime

GI = 1024**3
MI = 1024**2
MEMORY_CAPACITY = 4 * GI
DISK_CAPACITY = 100 * GI
MAX_PIDS = 10_000
CONTAINER_MEMORY = 256 * MI  # each running container's working set
CONTAINER_DISK = 2 * GI  # each container's writable layer and logs, until it is removed
CONTAINER_PIDS = 300
HARD = {MEMORY_AVAILABLE: "512Mi", NODEFS_AVAILABLE: "10%", PID_AVAILABLE: "10%"}
# a `pressure` event's level: (signal, what the rest of the machine uses); level 0 gives everything back
LEVELS: tuple[tuple[str, int], ...] = (
    ("", 0),
    (MEMORY_AVAILABLE, int(2.5 * GI)), (MEMORY_AVAILABLE, int(3.7 * GI)),
    (NODEFS_AVAILABLE, 80 * GI), (NODEFS_AVAILABLE, 95 * GI),
    (PID_AVAILABLE, 8_000), (PID_AVAILABLE, 9_500),
)


class Machine:
    """What the rest of the machine uses, and the Summary of it and of the runtime's containers."""

    def __init__(self, runtime: SimRuntime, clock: FakeClock) -> None:
        self.runtime = runtime
        self.clock = clock
        self.base: dict[str, int] = {MEMORY_AVAILABLE: 0, NODEFS_AVAILABLE: 0, PID_AVAILABLE: 0}

    def apply(self, level: int) -> None:
        signal, used = LEVELS[level % len(LEVELS)]
        if not signal:
            self.relieve()
        else:
            self.base[signal] = used

    def relieve(self) -> None:
        self.base = dict.fromkeys(self.base, 0)

    async def summary(self, _fresh: bool) -> dict[str, Any]:
        now = rfc3339(self.clock.now())
        pods: dict[str, dict[str, Any]] = {}
        mem = disk = pids = 0
        for o in self.runtime.objects():
            if o.is_sandbox:
                continue
            running = o.state is ContainerState.RUNNING
            p = pods.setdefault(o.pod.uid, {
                "podRef": {"name": o.pod.name, "namespace": o.pod.namespace, "uid": o.pod.uid},
                "memory": {"time": now, "workingSetBytes": 0}, "containers": [],
                "ephemeral-storage": {"time": now, "usedBytes": 0}, "process_stats": {"process_count": 0}})
            c_mem = CONTAINER_MEMORY if running else 0
            c_pids = CONTAINER_PIDS if running else 0
            p["memory"]["workingSetBytes"] += c_mem
            p["ephemeral-storage"]["usedBytes"] += CONTAINER_DISK
            p["process_stats"]["process_count"] += c_pids
            p["containers"].append({"name": o.container.name, "memory": {"time": now, "workingSetBytes": c_mem},
                                    "rootfs": {"time": now, "usedBytes": CONTAINER_DISK // 2},
                                    "logs": {"time": now, "usedBytes": CONTAINER_DISK // 2}})
            mem, disk, pids = mem + c_mem, disk + CONTAINER_DISK, pids + c_pids
        mem = min(MEMORY_CAPACITY, mem + self.base[MEMORY_AVAILABLE])
        disk = min(DISK_CAPACITY, disk + self.base[NODEFS_AVAILABLE])
        pids = min(MAX_PIDS, pids + self.base[PID_AVAILABLE])
        return {"node": {
            "memory": {"time": now, "availableBytes": MEMORY_CAPACITY - mem, "workingSetBytes": mem},
            "fs": {"time": now, "availableBytes": DISK_CAPACITY - disk, "capacityBytes": DISK_CAPACITY,
                   "usedBytes": disk},
            "rlimit": {"time": now, "maxpid": MAX_PIDS, "curproc": pids}},
            "pods": list(pods.values())}


def eviction_manager(machine: Machine, clock: FakeClock, recorder: EventRecorder, workers: PodWorkers,
                     active_pods: Callable[[], Sequence[Pod]], gc: ContainerGC,
                     evicted: Callable[[Pod], None]) -> EvictionManager:
    """As services/eviction.py builds it: node-level reclaim of dead containers for the disk, the kill through the
    pod workers. `evicted(pod)`: told of each eviction, for the invariants."""

    def kill(pod: Pod, grace: int, status_fn: PodStatusFn) -> None:
        evicted(pod)
        workers.update_pod(pod, kill=KillPodOptions(grace_override=grace, status_fn=status_fn))

    def terminated(pod: Pod) -> bool:
        w = workers.get(podview.uid(pod))  # as the agent's _pod_terminated
        return w is None or w.lifecycle is PodLifecycle.TERMINATED

    return EvictionManager(
        Settings(parse_thresholds(HARD), pressure_transition_period=60.0, reclaim={NODEFS_AVAILABLE: (gc.collect,)}),
        clock, machine.summary, active_pods, kill,
        lambda pod, etype, reason, msg, ann: recorder.pod_event(pod, etype, reason, msg, annotations=ann),
        recorder.node_event, terminated)
