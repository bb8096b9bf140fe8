"""One run: a trace of events applied to a SimNode on the SimLoop, invariants checked after every step."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cri.errors import RuntimeError_, RuntimeUnavailableError
from cri.fake import Gate, _Object
from cri.types import ContainerState, LinuxResources
from minikubelet.base import podview
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.worker.lifecycle import PodLifecycle, kill_timeout
from tests.sim.api_workload import ApiWorld
from tests.sim.invariants import Checker, SimRuntime, Violation
from tests.sim.loop import Blocked, Livelock, Scheduler, SimLoop
from tests.sim.node import SimNode
from tests.sim.pressure import Machine
from tests.sim.resize_checks import ResizeChecker
from tests.sim.shape_checks import ShapeChecker
from tests.sim.shapes import ExecScript
from tests.sim.shutdown import ShutdownOrder
from tests.sim.workload import FAULT_OPS, HANG_OPS, IMAGE, RUNTIME_OPS, Event, generate, pod_for, programs
from tests.unit.volumes.fake_mounter import FakeMounter

MAX_PODS = 4
QUIESCE = 900.0  # virtual seconds after the last pod is deleted before `quiescence-clean` is checked
QUIESCE_STEP = 30.0
QUIESCE_CLEAN = 120.0  # ... or once nothing is left and every deletion is checked, for this long
_TMP = "/dev/shm" if Path("/dev/shm").is_dir() else None


@dataclass
class Outcome:
    seed: int
    steps: int  # events applied (all of them when it passed)
    violation: Violation | None = None
    digest: str = ""  # of the run's runtime calls and statuses: the same seed gives the same digest
    virtual_seconds: float = 0.0
    log: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.violation is not None


class _ErrorLog(logging.Handler):
    """Unexpected exceptions the agent logs (a worker that crashed, a loop that died) fail the run."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.errors = errors

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None or "unexpectedly" in record.getMessage():
            self.errors.append(f"{record.name}: {record.getMessage()} {record.exc_info[1] if record.exc_info else ''}")


class Sim:
    def __init__(self, seed: int, root: Path) -> None:
        self.seed = seed
        self.root = root
        self.clock = FakeClock()
        self.runtime = SimRuntime(self.clock, images=[IMAGE])
        for name, prog in programs().items():
            self.runtime.program(name, prog)
        self.checker = Checker(self.runtime, self.clock, MAX_PODS)
        self.machine = Machine(self.runtime, self.clock)  # the rest of the machine outlives the agent too
        self.script = ExecScript(self.clock)
        self.runtime.set_exec(self.script)
        self.shapes = ShapeChecker(self.runtime, self.clock, self.checker, self.script)
        checker_start = self.runtime.on_start

        def on_start(obj: _Object) -> None:
            checker_start(obj)
            self.shapes.on_start(obj)

        self.runtime.on_start = on_start
        self.resizes = ResizeChecker(self.runtime, container_spec=self._container_spec)

        def on_update(obj: _Object, before: LinuxResources | None) -> None:
            try:
                self.resizes.on_update(obj, before)
            except Violation as v:
                self.checker.pending = self.checker.pending or v

        self.runtime.on_update = on_update
        self.shutdown_order = ShutdownOrder(self.clock)
        self.shapes.shutdown_killed = self.shutdown_order.killed
        self.shutting_down: asyncio.Task[None] | None = None  # the node shutdown's processing; then a reboot
        self.wanted: dict[str, Pod] = {}  # uid -> pod, in creation order
        self.created = 0
        self.node: SimNode | None = None
        self.gates: list[Gate] = []
        self.mounter = FakeMounter()  # the machine's mounts outlive the agent
        self.trace: list[str] = []
        self.starting: asyncio.Task[None] | None = None
        self.api = ApiWorld(self.clock, seed, self.checker)  # the API server and the pods created through it
        self.kill_overdue: dict[str, float] = {}  # preemption victim uid -> when its kill's wait times out

    def _container_spec(self, uid: str, name: str) -> Pod | None:
        """The container as the pod manager has it now (its resizePolicy as the last update set it)."""
        pod = self.node.manager.desired.get(uid) if self.node is not None else None
        return next((c for c in podview.init_containers(pod) + podview.app_containers(pod)
                     if c.get("name") == name), None) if pod is not None else None

    def _new_node(self) -> SimNode:
        node = SimNode(self.root, self.runtime, self.clock, MAX_PODS, on_finished=lambda _uid: None, mounter=self.mounter,
                       machine=self.machine, evicted=self._evicted,
                       preempted=self._preempted, shutdown_order=self.shutdown_order)
        self.api.attach(node, MAX_PODS)
        return node

    def _evicted(self, pod: Pod) -> None:
        node = self.node
        # a pod refused after a restart, whose stand-in worker stops what it ran before, is active (under
        # termination) and may be picked: its status stays the refusal, nothing of it runs again either way
        if node is not None and node.manager.rejected(podview.uid(pod)):
            return
        self.shapes.evict(pod, "evicted")

    def _preempted(self, pod: Pod) -> None:
        node = self.node
        grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        self.kill_overdue.setdefault(podview.uid(pod), self.clock.monotonic() + kill_timeout(
            grace if isinstance(grace, int) else 0))
        # Victims are killed one after another. One already terminated when its turn came keeps its own status (a
        # terminated pod's kill is dropped), and so does a pod refused after a restart, whose stand-in worker writes
        # no status (seed 205). A pod still terminating for another reason may end with either: upstream hands each
        # terminating sync the last status function asked so far (acknowledgeTerminating), so a retried sync
        # takes the preemption's (seed 21), one that succeeds keeps the reason it began with (seed 38).
        w = node.workers.get(podview.uid(pod)) if node is not None else None
        if node is not None and node.manager.rejected(podview.uid(pod)):
            return
        if w is not None and w.lifecycle is PodLifecycle.TERMINATED:
            return
        self.shapes.evict(pod, "preempted")
        if w is not None and w.lifecycle is PodLifecycle.TERMINATING and not w.removed:
            # its termination began for its own reason (it failed or finished by itself) and its terminating sync
            # was under way: upstream read that sync's status function (none) when it began and drops the
            # preemption's once it succeeds (completeTerminating), so the pod may keep its own phase and reason
            # (seed 137)
            self.shapes.own_end_allowed.add(podview.uid(pod))

    def start(self) -> None:
        """The agent starts in a task of its own: the driver never waits on agent code (a hung runtime call
        would stop virtual time)."""
        self.node = self._new_node()
        self.starting = asyncio.get_running_loop().create_task(
            self.node.start(lambda: list(self.wanted.values())), name="agent-start")

    def _running(self) -> list[str]:
        return sorted(o.id for o in self.runtime.objects()
                      if not o.is_sandbox and o.state is ContainerState.RUNNING)

    async def apply(self, ev: Event) -> None:
        if self.shutting_down is not None and self.shutting_down.done():
            # the node shut down once the manager had processed the shutdown: the agent starts again
            self.shutting_down = None
            await self.crash()
        node = self.node
        assert node is not None
        if ev.kind == "create":
            pod = pod_for(self.created, ev.a, decorated=ev.b == 1)
            self.created += 1
            self.wanted[podview.uid(pod)] = pod
            self.shapes.pods[podview.uid(pod)] = pod
            node.set_pods(list(self.wanted.values()))
        elif ev.kind == "delete" and self.wanted:
            uid = sorted(self.wanted)[ev.a % len(self.wanted)]
            pod = self.wanted.pop(uid)
            node.set_pods(list(self.wanted.values()))
            self.checker.deleted(uid, float((pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0))
        elif ev.kind == "static-edit" and (statics := sorted(u for u, p in self.wanted.items() if podview.is_static(p))):
            self._edit_static(node, statics[ev.a % len(statics)])
        elif ev.kind in ("exit", "vanish") and (running := self._running()):
            cid = running[ev.a % len(running)]
            if ev.kind == "vanish":
                obj = self.runtime._get(cid)
                self.checker.removed_behind_agent(obj.pod.uid, obj.container.name)
                self.shapes.probe_kills.pop((obj.pod.uid, obj.container.name), None)  # its attempt count starts over
                self.runtime.vanishing = True
                try:
                    self.runtime.vanish(cid, emit=ev.a % 2 == 0)
                finally:
                    self.runtime.vanishing = False
            else:
                self.runtime.exit_container(cid, max(ev.b, 0), oom=ev.b < 0)
        elif ev.kind == "fail":
            op = FAULT_OPS[ev.a % len(FAULT_OPS)]
            self.runtime.fail(op, RuntimeError_(f"injected {op} failure"), times=ev.b)
        elif ev.kind == "hang":
            gate = self.runtime.hang(HANG_OPS[ev.a % len(HANG_OPS)])
            self.gates.append(gate)
            asyncio.get_running_loop().call_later(float(ev.b), gate.release)
        elif ev.kind == "crash":
            await self.crash()
        elif ev.kind == "runtime-restart":
            self._runtime_restart(float(ev.b), live_restore=ev.a % 2 == 0)
        elif ev.kind == "unhealthy" and (probed := self._probed()):
            self.script.unhealthy.add(probed[ev.a % len(probed)])
        elif ev.kind == "pressure":
            self.machine.apply(ev.b)
        elif ev.kind == "shutdown" and self.shutting_down is None and node.started:
            # what logind's PrepareForShutdown(true) makes the manager do
            node.shutdown.shutting_down = True
            self.shutting_down = asyncio.get_running_loop().create_task(node.shutdown.process_shutdown(),
                                                                        name="node-shutdown")
        elif ev.kind.startswith("api-"):
            self.api.apply(ev)

    def _edit_static(self, node: SimNode, uid: str) -> None:
        """A static pod's file changes: the file source gives a pod of a new uid and config.hash under the same name
        (the old one leaves the source); its mirror pod is then stale."""
        old = self.wanted.pop(uid)
        self.checker.deleted(uid, float((old.get("spec") or {}).get("terminationGracePeriodSeconds") or 0))
        new_uid = f"uid-{self.created}"
        self.created += 1
        md = {**old["metadata"], "uid": new_uid, "labels": {"edit": new_uid}}
        md["annotations"] = {**md["annotations"], "kubernetes.io/config.hash": new_uid}
        pod = {**copy.deepcopy(old), "metadata": md}
        self.wanted[new_uid] = pod
        self.shapes.pods[new_uid] = pod
        node.set_pods(list(self.wanted.values()))

    def _runtime_restart(self, down: float, live_restore: bool) -> None:
        """The container runtime restarts: every call is refused for `down` seconds and the event stream breaks;
        without live-restore (dockerd's default) every container and sandbox is killed with it. containerd keeps
        its shims, so its containers live on (`live_restore`)."""
        end = self.clock.monotonic() + down
        exc = RuntimeUnavailableError("Cannot connect to the container runtime: it is restarting")

        def down_now(*_args: object) -> bool:
            return self.clock.monotonic() < end

        for op in RUNTIME_OPS:
            self.runtime.fail(op, exc, times=1 << 30, when=down_now)
        if not live_restore:
            self.runtime.stop_all()
        self.runtime.break_events(exc)

    def _probed(self) -> list[str]:
        """Running containers with a liveness probe."""
        out = []
        for o in self.runtime.objects():
            pod = self.shapes.pods.get(o.pod.uid)
            if o.is_sandbox or o.state is not ContainerState.RUNNING or pod is None:
                continue
            spec = next((c for c in pod["spec"]["containers"] if c["name"] == o.container.name), None)
            if spec is not None and "livenessProbe" in spec:
                out.append(o.id)
        return sorted(out)

    async def crash(self) -> None:
        me = asyncio.current_task()
        loop = asyncio.get_running_loop()
        assert isinstance(loop, SimLoop)
        tasks = [t for t in loop.tasks() if t is not me]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.runtime._subscribers.clear()
        self.shutting_down = None
        self.kill_overdue.clear()
        self.checker.agent_restarted()
        self.resizes.agent_restarted()
        self.shapes.agent_restarted(self._api_pods_terminal())
        self.start()

    def _api_pods_terminal(self) -> set[str]:
        """An API pod comes back after a restart with the status the agent wrote (the API server has it): a
        terminal one is not admitted again. The uids of those."""
        node = self.node
        assert node is not None
        out: set[str] = set()
        for uid, pod in list(self.wanted.items()):
            status = node.statuses.get_pod_status(uid)
            if podview.is_static(pod) or status is None or status.get("phase") not in ("Succeeded", "Failed"):
                continue
            self.wanted[uid] = {**pod, "status": dict(status)}
            out.add(uid)
        return out

    def check(self) -> None:
        node = self.node
        assert node is not None
        statuses = [(podview.uid(e.pod), e.status) for e in node.statuses.statuses()]
        workers = set(node.workers.uids())
        # a rejected pod's worker only stops what it ran before an agent restart, and a pod deleted before this agent
        # saw it is only stopped: active (upstream counts a pod whose termination is under way), never admitted.
        # A preemption victim whose kill outlived killPodNow's wait (1.5 x grace, at least 10 s) does not count
        # either: upstream's evictPodsToFreeRequests logs "Failed to evict pod" and admits the critical pod all the
        # same (seed 168: a hung stop_container), leaving the victim to later syncs.
        mono = self.clock.monotonic()
        admitted = sum(1 for p in node.manager.active_pods()
                       if podview.uid(p) in workers and podview.uid(p) in node.admitted
                       and mono < self.kill_overdue.get(podview.uid(p), float("inf")))
        self.checker.check(statuses, workers, admitted)
        if self.shutdown_order.violation is not None:
            raise self.shutdown_order.violation
        running = [p for p in node.manager.active_pods()
                   if (w := node.workers.get(podview.uid(p))) is not None and not w.terminating
                   and not node.manager.rejected(podview.uid(p))]
        # as admitted: a resize counts once the allocation manager allocated it, not while it is Deferred
        self.shapes.check(dict(statuses), node.resize.allocation.allocated_pods(running))
        # statuses of this agent only: before its first sync of a pod its resize conditions are not known yet
        self.resizes.check(node.resize.allocated, node.resize.conditions, dict(statuses),
                           {u for u in workers if (w := node.workers.get(u)) is None or w.terminating})
        self.resizes.in_progress_bound(node.resize.conditions, {u for u in workers if (w := node.workers.get(u))
                                                               is not None and not w.terminating}, mono)
        api = self.api.check(node)
        self.trace.append(f"{self.clock.monotonic():.3f} {self._running()} "
                          f"{sorted((u, s.get('phase')) for u, s in statuses)} {api}")

    def _clean(self, node: SimNode) -> bool:
        try:
            self.checker.check_clean(self.root, set(node.workers.uids()), len(node.statuses.statuses()))
        except Violation:
            return False
        return not self.mounter.mounted and not self.api.api.pods()

    async def quiesce(self, sched: Scheduler) -> None:
        """Faults stop, every pod is deleted; then nothing of them may be left."""
        self.runtime._failures.clear()
        self.machine.relieve()
        for gate in self.gates:
            gate.release()
        node = self.node
        assert node is not None
        for uid, pod in sorted(self.wanted.items()):
            self.checker.deleted(uid, float((pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0))
        self.wanted.clear()
        node.set_pods([])
        self.api.quiesce()
        t, clean_since = 0.0, -1.0
        while t < QUIESCE:
            await sched.run_for(QUIESCE_STEP)
            t += QUIESCE_STEP
            self.check()
            # every deletion's deadline checked and nothing left, for two orphan sweeps and GC passes: the rest of
            # the 15 minutes would only tick idle timers
            if self.checker.deletions or not self._clean(node):
                clean_since = -1.0
            elif clean_since < 0:
                clean_since = t
            elif t - clean_since >= QUIESCE_CLEAN:
                break
        node.sweep_orphans()
        self.api.check_clean()
        self.checker.check_clean(self.root, set(node.workers.uids()), len(node.statuses.statuses()))
        if self.mounter.mounted:
            raise Violation("quiescence-clean", f"tmpfs volumes still mounted: {self.mounter.mounted[:3]}")


async def _main(sim: Sim, events: list[Event], out: Outcome, sched: Scheduler) -> None:
    sim.start()
    for i, ev in enumerate(events):
        out.steps = i
        sim.trace.append(str(ev))
        await sim.apply(ev)
        await sched.run_for(ev.dt)
        sim.check()
    out.steps = len(events)
    await sim.quiesce(sched)


def run_trace(seed: int, events: list[Event], *, seeded_order: bool = True) -> Outcome:
    """Run `events` (the agent's own random draws seeded by `seed`); the outcome names the first violation.
    `seeded_order`: the tasks ready at once run in an order drawn from the seed (else asyncio's FIFO)."""
    random.seed(seed)
    root = Path(tempfile.mkdtemp(prefix="mkl-sim-", dir=_TMP))
    sim = Sim(seed, root)
    loop = SimLoop(sim.clock, random.Random(f"task order {seed}") if seeded_order else None)
    sched = Scheduler(loop, interrupt=sim.checker.interrupt)
    out = Outcome(seed, 0)
    errors = sim.checker.errors
    handler = _ErrorLog(errors)
    logging.getLogger().addHandler(handler)
    try:
        asyncio.set_event_loop(loop)
        task = loop.create_task(_main(sim, events, out, sched))
        try:
            loop.run_until_complete(task)
        except Violation as v:
            out.violation = v
        except (Livelock, Blocked) as e:
            out.violation = Violation("progress", str(e))
        if out.violation is None and errors:
            out.violation = Violation("no-crash", errors[0])
        try:
            _drain(loop)
        except (Livelock, Blocked):
            # a task that does not end once cancelled (it waits for virtual time that no longer passes) ends the run
            # all the same: after a violation it is that violation's aftermath, else it is one of its own
            if out.violation is None:
                stuck = sorted(t.get_name() for t in loop.tasks() if not t.done())
                out.violation = Violation("progress", f"tasks did not end once cancelled: {stuck[:5]}")
    finally:
        logging.getLogger().removeHandler(handler)
        asyncio.set_event_loop(None)
        loop.close()
        shutil.rmtree(root, ignore_errors=True)
    out.virtual_seconds = sim.clock.monotonic()
    out.digest = hashlib.sha256("\n".join(sim.trace).encode()).hexdigest()[:16]
    out.log = sim.trace
    return out


def _drain(loop: SimLoop) -> None:
    tasks = loop.tasks()
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def run_seed(seed: int, steps: int, *, seeded_order: bool = True) -> Outcome:
    return run_trace(seed, generate(seed, steps), seeded_order=seeded_order)
