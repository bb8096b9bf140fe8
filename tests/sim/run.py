"""One run: a trace of events applied to a SimNode on the SimLoop, invariants checked after every step."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cri.errors import RuntimeError_
from cri.fake import Gate
from cri.types import ContainerState
from minikubelet.base import podview
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from tests.sim.api_workload import ApiWorld
from tests.sim.invariants import Checker, SimRuntime, Violation
from tests.sim.loop import Blocked, Livelock, Scheduler, SimLoop
from tests.sim.node import SimNode
from tests.sim.workload import FAULT_OPS, HANG_OPS, IMAGE, Event, generate, pod_for, programs
from tests.unit.volumes.fake_mounter import FakeMounter

MAX_PODS = 4
QUIESCE = 900.0  # virtual seconds after the last pod is deleted before `quiescence-clean` is checked
QUIESCE_STEP = 30.0
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
        self.wanted: dict[str, Pod] = {}  # uid -> pod, in creation order
        self.created = 0
        self.node: SimNode | None = None
        self.gates: list[Gate] = []
        self.mounter = FakeMounter()  # the machine's mounts outlive the agent
        self.trace: list[str] = []
        self.starting: asyncio.Task[None] | None = None
        self.api = ApiWorld(self.clock, seed, self.checker)  # the API server and the pods created through it

    def _new_node(self) -> SimNode:
        node = SimNode(self.root, self.runtime, self.clock, MAX_PODS, on_finished=lambda _uid: None, mounter=self.mounter)
        self.api.attach(node, MAX_PODS)
        return node

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
        node = self.node
        assert node is not None
        if ev.kind == "create":
            pod = pod_for(self.created, ev.a)
            self.created += 1
            self.wanted[podview.uid(pod)] = pod
            node.set_pods(list(self.wanted.values()))
        elif ev.kind == "delete" and self.wanted:
            uid = sorted(self.wanted)[ev.a % len(self.wanted)]
            pod = self.wanted.pop(uid)
            node.set_pods(list(self.wanted.values()))
            self.checker.deleted(uid, float((pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0))
        elif ev.kind in ("exit", "vanish") and (running := self._running()):
            cid = running[ev.a % len(running)]
            if ev.kind == "vanish":
                obj = self.runtime._get(cid)
                self.checker.removed_behind_agent(obj.pod.uid, obj.container.name)
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
        elif ev.kind.startswith("api-"):
            self.api.apply(ev)

    async def crash(self) -> None:
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for q in list(self.runtime._subscribers):
            self.runtime._subscribers.discard(q)
        self.checker.agent_restarted()
        self.start()

    def check(self) -> None:
        node = self.node
        assert node is not None
        statuses = [(podview.uid(e.pod), e.status) for e in node.statuses.statuses()]
        workers = set(node.workers.uids())
        # a rejected pod's worker only stops what it ran before an agent restart, and a pod deleted before this agent
        # saw it is only stopped: active (upstream counts a pod whose termination is under way), never admitted
        admitted = sum(1 for p in node.manager.active_pods()
                       if podview.uid(p) in workers and podview.uid(p) in node.admitted)
        self.checker.check(statuses, workers, admitted)
        api = self.api.check(node)
        self.trace.append(f"{self.clock.monotonic():.3f} {self._running()} "
                          f"{sorted((u, s.get('phase')) for u, s in statuses)} {api}")

    async def quiesce(self, sched: Scheduler) -> None:
        """Faults stop, every pod is deleted; then nothing of them may be left."""
        self.runtime._failures.clear()
        for gate in self.gates:
            gate.release()
        node = self.node
        assert node is not None
        for uid, pod in sorted(self.wanted.items()):
            self.checker.deleted(uid, float((pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0))
        self.wanted.clear()
        node.set_pods([])
        self.api.quiesce()
        t = 0.0
        while t < QUIESCE:
            await sched.run_for(QUIESCE_STEP)
            t += QUIESCE_STEP
            self.check()
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


def run_trace(seed: int, events: list[Event]) -> Outcome:
    """Run `events` (the agent's own random draws seeded by `seed`); the outcome names the first violation."""
    random.seed(seed)
    root = Path(tempfile.mkdtemp(prefix="mkl-sim-", dir=_TMP))
    sim = Sim(seed, root)
    loop = SimLoop(sim.clock)
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
        _drain(loop)
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
    tasks = asyncio.all_tasks(loop)
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def run_seed(seed: int, steps: int) -> Outcome:
    return run_trace(seed, generate(seed, steps))
