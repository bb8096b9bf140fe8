"""Container lifecycle events from a CRI runtime.

CRI 1.26+ runtimes stream them (`GetContainerEvents`, what the kubelet's evented PLEG reads; containerd
1.7+). containerd 1.6 answers Unimplemented: then the events are derived from relisting sandboxes and
containers (the generic PLEG's way), each change turned into the events it implies, in order. A container
first seen already exited yields CREATED, STARTED and STOPPED, as it must have gone through them. The relists
are the client's own (`list_summaries`, the PLEG's relist every second, upstream's only relist): the stream
lists by itself only when nothing else has for RELIST_PERIOD. While relisting, containerd's own event service
(task_exits.py) says when a task exits: the relist then runs at once and every CHASE_PERIOD until CRI shows
the exit, instead of at the next period.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from cri.remote.client import Channel, details, rpc, server_stream
from cri.remote.task_exits import task_exits
from cri.remote.v1 import api_pb2 as pb
from cri.types import LABEL_POD_UID, ContainerEvent, ContainerEventType

log = logging.getLogger(__name__)

# The stream's own relist when no listing of the client's came for this long (the PLEG relists every second:
# with it running, the stream never lists by itself).
RELIST_PERIOD = 2.5
# After containerd said a task exited: relist this often until CRI shows it (CRI records the exit once the
# task is deleted, tens of ms later), for at most CHASE_LIMIT; the periodic relist covers anything longer.
CHASE_PERIOD = 0.01
CHASE_LIMIT = 1.0

# Lifecycle steps in order; a state is the number of steps an object has gone through.
_STEPS = (ContainerEventType.CREATED, ContainerEventType.STARTED, ContainerEventType.STOPPED)
_CONTAINER_STEPS = {pb.CONTAINER_CREATED: 1, pb.CONTAINER_RUNNING: 2, pb.CONTAINER_EXITED: 3, pb.CONTAINER_UNKNOWN: 1}
_EVENT_TYPES = {
    pb.CONTAINER_CREATED_EVENT: ContainerEventType.CREATED,
    pb.CONTAINER_STARTED_EVENT: ContainerEventType.STARTED,
    pb.CONTAINER_STOPPED_EVENT: ContainerEventType.STOPPED,
    pb.CONTAINER_DELETED_EVENT: ContainerEventType.DELETED,
}


@dataclass(frozen=True)
class Seen:
    """What one relist showed of a sandbox or container."""

    steps: int  # 1 created, 2 started, 3 stopped
    pod_uid: str
    is_sandbox: bool


def snapshot(sandboxes: list[pb.PodSandbox], containers: list[pb.Container]) -> dict[str, Seen]:
    seen = {s.id: Seen(2 if s.state == pb.SANDBOX_READY else 3, s.labels.get(LABEL_POD_UID, s.metadata.uid), True)
            for s in sandboxes}
    for c in containers:
        seen[c.id] = Seen(_CONTAINER_STEPS.get(c.state, 1), c.labels.get(LABEL_POD_UID, ""), False)
    return seen


def diff(before: dict[str, Seen], after: dict[str, Seen], now: float) -> list[ContainerEvent]:
    """The events that take `before` to `after`."""
    events = []
    for object_id, seen in after.items():
        done = before[object_id].steps if object_id in before else 0
        for step in range(done, seen.steps):
            events.append(ContainerEvent(object_id, _STEPS[step], now, seen.pod_uid, seen.is_sandbox))
    for object_id, seen in before.items():
        if object_id not in after:
            events.extend(_removed(object_id, seen, now))
    return events


def _removed(object_id: str, seen: Seen, now: float) -> list[ContainerEvent]:
    """A started object that is gone has stopped first; one never started goes straight away."""
    events = []
    if seen.steps == 2:
        events.append(ContainerEvent(object_id, ContainerEventType.STOPPED, now, seen.pod_uid, seen.is_sandbox))
    events.append(ContainerEvent(object_id, ContainerEventType.DELETED, now, seen.pod_uid, seen.is_sandbox))
    return events


DELETED = 4


@dataclass(frozen=True)
class Note:
    """This client's own call succeeded: the object reached `steps` (DELETED once removed)."""

    object_id: str
    steps: int
    pod_uid: str = ""
    is_sandbox: bool = False


@dataclass(frozen=True)
class Listed:
    """This client listed every sandbox and container (the PLEG's relist): as good as the stream's own relist."""

    seen: dict[str, Seen]
    started: float  # loop.time() before the listing was asked for


@dataclass(frozen=True)
class TaskExited:
    """containerd's event service said this container's task exited; CRI will say so a little later."""

    container_id: str


class Tracker:
    """What one subscriber knows of each object, advanced by relists and by the client's own calls.

    A relist misses objects that come and go between two relists (a container that exits at once and is
    removed); the client's own calls fill that in. Steps only advance, so a relist older than a call
    cannot take an object back, and an object noted after a relist began is not deleted by that relist.
    """

    def __init__(self, first: dict[str, Seen]) -> None:
        self.known = dict(first)
        self._noted_at: dict[str, float] = {}
        self._deleted: set[str] = set()

    def note(self, note: Note, now: float, at: float) -> list[ContainerEvent]:
        known = self.known.get(note.object_id)
        pod_uid = note.pod_uid or (known.pod_uid if known else "")
        if note.object_id in self._deleted or (known is None and not pod_uid):
            return []
        if note.steps == DELETED:
            self._deleted.add(note.object_id)
            self._noted_at.pop(note.object_id, None)
            gone = self.known.pop(note.object_id, None)
            if gone is None:
                return []
            return _removed(note.object_id, gone, now)
        self._noted_at[note.object_id] = at
        now_seen = Seen(max(note.steps, known.steps if known else 0), pod_uid,
                        note.is_sandbox or (known.is_sandbox if known else False))
        self.known[note.object_id] = now_seen
        return diff({note.object_id: known} if known else {}, {note.object_id: now_seen}, now)

    def running(self, object_id: str) -> bool:
        """Known and not yet seen stopped (by a relist or the client's own call)."""
        known = self.known.get(object_id)
        return known is not None and known.steps < _CONTAINER_STEPS[pb.CONTAINER_EXITED]

    def relisted(self, listed: dict[str, Seen], started: float, now: float) -> list[ContainerEvent]:
        self._deleted &= listed.keys()  # ids still listed were removed meanwhile; the rest is forgotten
        after: dict[str, Seen] = {}
        for object_id, seen in listed.items():
            if object_id in self._deleted:
                continue
            known = self.known.get(object_id)
            after[object_id] = seen if known is None or seen.steps >= known.steps else known
        for object_id, known in self.known.items():
            if object_id not in after and self._noted_at.get(object_id, 0.0) >= started:
                after[object_id] = known  # noted after this relist began: absent only because it is older
        events = diff(self.known, after, now)
        self.known = after
        return events


def from_cri_event(event: pb.ContainerEventResponse) -> ContainerEvent | None:
    event_type = _EVENT_TYPES.get(event.container_event_type)
    if event_type is None:
        return None
    sandbox = event.pod_sandbox_status
    return ContainerEvent(
        container_id=event.container_id,
        type=event_type,
        timestamp=event.created_at / 1e9,
        pod_uid=sandbox.labels.get(LABEL_POD_UID, sandbox.metadata.uid),
        is_sandbox=bool(sandbox.id) and event.container_id == sandbox.id,
    )


async def _relist(channel: Channel) -> dict[str, Seen]:
    sandboxes = await rpc(channel.runtime.ListPodSandbox(pb.ListPodSandboxRequest()))
    containers = await rpc(channel.runtime.ListContainers(pb.ListContainersRequest()))
    return snapshot(list(sandboxes.items), list(containers.containers))


async def relisted_events(channel: Channel, notes: asyncio.Queue[Note | Listed | TaskExited], period: float = RELIST_PERIOD,
                          now: Callable[[], float] = time.time) -> AsyncGenerator[ContainerEvent, None]:
    loop = asyncio.get_running_loop()
    tracker = Tracker(await _relist(channel))
    last_relist = loop.time()
    next_relist = last_relist + period
    chase: dict[str, float] = {}  # container id containerd said exited -> when to stop relisting early for it
    while True:
        due = min(next_relist, last_relist + CHASE_PERIOD) if chase else next_relist
        try:
            async with asyncio.timeout_at(due):
                item = await notes.get()
            if isinstance(item, TaskExited):
                if tracker.running(item.container_id):
                    chase[item.container_id] = loop.time() + CHASE_LIMIT
                events = []
            elif isinstance(item, Listed):
                events = tracker.relisted(item.seen, item.started, now())
                last_relist = loop.time()
                next_relist = last_relist + period
                chase = {cid: until for cid, until in chase.items() if until > last_relist and tracker.running(cid)}
            else:
                events = tracker.note(item, now(), loop.time())
        except TimeoutError:
            started = loop.time()
            events = tracker.relisted(await _relist(channel), started, now())
            last_relist = loop.time()
            next_relist = last_relist + period
            chase = {cid: until for cid, until in chase.items() if until > last_relist and tracker.running(cid)}
        for event in events:
            yield event


async def forward_task_exits(channel: Channel, notes: asyncio.Queue[Note | Listed | TaskExited],
                             initial_backoff: float = 1.0, max_backoff: float = 30.0) -> None:
    """containerd's task exits into the relisting loop's queue, for as long as the loop runs."""
    backoff = initial_backoff
    while True:
        try:
            async for container_id in task_exits(channel):
                backoff = initial_backoff
                notes.put_nowait(TaskExited(container_id))
        except GRPCError as exc:
            if exc.status is Status.UNIMPLEMENTED:
                log.info("the runtime has no containerd event service: exits are seen by relisting alone")
                return
            log.warning("containerd task events failed: %s; again in %.1fs", details(exc), backoff)
        await asyncio.sleep(backoff)
        backoff = min(max_backoff, backoff * 2)


Subscribe = Callable[[], AbstractContextManager[asyncio.Queue[Note | Listed | TaskExited]]]


async def container_events(channel: Channel, subscribe: Subscribe, relist_period: float = RELIST_PERIOD,
                           initial_backoff: float = 0.5,
                           max_backoff: float = 30.0) -> AsyncGenerator[ContainerEvent, None]:
    """`subscribe` hands out a queue of the client's own calls while relisting (unused with a real stream)."""
    backoff = initial_backoff
    evented = True
    while True:
        try:
            if evented:
                async for response in server_stream(channel.runtime.GetContainerEvents, pb.GetEventsRequest()):
                    backoff = initial_backoff
                    event = from_cri_event(response)
                    if event is not None:
                        yield event
                log.warning("CRI container event stream ended; subscribing again")
            else:
                with subscribe() as notes:
                    exits = asyncio.create_task(forward_task_exits(channel, notes))
                    try:
                        async for event in relisted_events(channel, notes, relist_period):
                            backoff = initial_backoff
                            yield event
                    finally:
                        exits.cancel()
                        await asyncio.gather(exits, return_exceptions=True)
        except GRPCError as exc:
            if evented and exc.status is Status.UNIMPLEMENTED:
                log.info("the runtime has no GetContainerEvents (CRI < 1.26): events from relisting")
                evented = False
                continue
            log.warning("CRI container events failed: %s; again in %.1fs", details(exc), backoff)
        await asyncio.sleep(backoff)
        backoff = min(max_backoff, backoff * 2)
