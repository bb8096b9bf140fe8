"""Events derived from relists plus the client's own calls (cri.remote.events), on CRI messages."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

from cri.remote.client import Channel
from cri.remote.events import (
    DELETED,
    Listed,
    Note,
    Seen,
    TaskExited,
    Tracker,
    diff,
    from_cri_event,
    relisted_events,
    snapshot,
)
from cri.remote.v1 import api_pb2 as pb
from cri.types import LABEL_POD_UID, ContainerEvent, ContainerEventType

CREATED, STARTED, STOPPED, GONE = (ContainerEventType.CREATED, ContainerEventType.STARTED,
                                   ContainerEventType.STOPPED, ContainerEventType.DELETED)


def kinds(events: list[ContainerEvent]) -> list[tuple[str, ContainerEventType]]:
    return [(e.container_id, e.type) for e in events]


def test_snapshot_reads_states_and_pod_uids() -> None:
    sandboxes = [pb.PodSandbox(id="s1", state=pb.SANDBOX_READY, labels={LABEL_POD_UID: "u1"}),
                 pb.PodSandbox(id="s2", state=pb.SANDBOX_NOTREADY, metadata=pb.PodSandboxMetadata(uid="u2"))]
    containers = [pb.Container(id="c1", state=pb.CONTAINER_EXITED, labels={LABEL_POD_UID: "u1"}),
                  pb.Container(id="c2", state=pb.CONTAINER_CREATED)]
    assert snapshot(sandboxes, containers) == {
        "s1": Seen(2, "u1", True), "s2": Seen(3, "u2", True), "c1": Seen(3, "u1", False), "c2": Seen(1, "", False)}


def test_diff_fills_in_the_steps_between_two_relists() -> None:
    before = {"a": Seen(1, "u", False), "b": Seen(2, "u", False), "gone": Seen(2, "u", False),
              "never-started": Seen(1, "u", False)}
    after = {"a": Seen(3, "u", False), "b": Seen(2, "u", False), "new": Seen(3, "u", False)}
    events = diff(before, after, 5.0)
    assert kinds(events) == [("a", STARTED), ("a", STOPPED), ("new", CREATED), ("new", STARTED), ("new", STOPPED),
                             ("gone", STOPPED), ("gone", GONE), ("never-started", GONE)]
    assert all(e.timestamp == 5.0 and e.pod_uid == "u" for e in events)


def test_own_calls_are_not_repeated_by_the_next_relist() -> None:
    tracker = Tracker({})
    assert kinds(tracker.note(Note("s", 2, "u", is_sandbox=True), 1.0, at=10.0)) == [("s", CREATED), ("s", STARTED)]
    assert kinds(tracker.note(Note("c", 1, "u"), 1.0, at=10.1)) == [("c", CREATED)]
    assert kinds(tracker.note(Note("c", 2), 1.0, at=10.2)) == [("c", STARTED)]  # pod uid known from the create
    assert tracker.note(Note("unknown", 2), 1.0, at=10.3) == []  # no pod uid to report: the relist will do it
    # A relist that began before the calls shows neither: nothing is deleted, nothing goes back.
    assert tracker.relisted({}, started=9.0, now=2.0) == []
    # A later relist shows the container exited by itself.
    later = {"s": Seen(2, "u", True), "c": Seen(3, "u", False)}
    assert kinds(tracker.relisted(later, started=11.0, now=3.0)) == [("c", STOPPED)]
    assert tracker.relisted(later, started=12.0, now=4.0) == []


def test_a_container_gone_between_relists_still_reports_every_step() -> None:
    tracker = Tracker({"s": Seen(2, "u", True)})
    events = [*tracker.note(Note("c", 1, "u"), 1.0, 1.0), *tracker.note(Note("c", 2), 1.0, 1.0),
              *tracker.note(Note("c", DELETED), 1.0, 1.0)]
    assert kinds(events) == [("c", CREATED), ("c", STARTED), ("c", STOPPED), ("c", GONE)]
    # An older relist that still lists it does not bring it back; once it is unlisted it is forgotten.
    assert tracker.relisted({"s": Seen(2, "u", True), "c": Seen(3, "u", False)}, started=0.5, now=2.0) == []
    assert tracker.relisted({"s": Seen(2, "u", True)}, started=3.0, now=3.0) == []
    assert tracker.note(Note("c", DELETED), 4.0, 4.0) == []


def test_relist_deletes_what_it_no_longer_lists() -> None:
    tracker = Tracker({"s": Seen(3, "u", True), "c": Seen(3, "u", False)})
    assert kinds(tracker.relisted({}, started=1.0, now=1.0)) == [("s", GONE), ("c", GONE)]


def test_cri_event_stream_messages() -> None:
    sandbox = pb.PodSandboxStatus(id="s", labels={LABEL_POD_UID: "u"})
    started = pb.ContainerEventResponse(container_id="c", container_event_type=pb.CONTAINER_STARTED_EVENT,
                                        created_at=1_500_000_000, pod_sandbox_status=sandbox)
    assert from_cri_event(started) == ContainerEvent("c", STARTED, 1.5, "u", False)
    own = pb.ContainerEventResponse(container_id="s", container_event_type=pb.CONTAINER_DELETED_EVENT,
                                    pod_sandbox_status=sandbox)
    assert from_cri_event(own) == ContainerEvent("s", GONE, 0.0, "u", True)


class ScriptedRuntime:
    """ListPodSandbox / ListContainers answering from `state`, counting the relists."""

    def __init__(self) -> None:
        self.state = pb.CONTAINER_RUNNING
        self.relists = 0

    async def ListPodSandbox(self, request: pb.ListPodSandboxRequest) -> pb.ListPodSandboxResponse:
        self.relists += 1
        return pb.ListPodSandboxResponse(items=[pb.PodSandbox(id="s", state=pb.SANDBOX_READY,
                                                              labels={LABEL_POD_UID: "u"})])

    async def ListContainers(self, request: pb.ListContainersRequest) -> pb.ListContainersResponse:
        return pb.ListContainersResponse(containers=[pb.Container(id="c", state=self.state,
                                                                  labels={LABEL_POD_UID: "u"})])


async def test_a_task_exit_relists_until_cri_shows_it_then_the_period_resumes() -> None:
    runtime = ScriptedRuntime()
    channel = cast(Channel, SimpleNamespace(runtime=runtime))
    notes: asyncio.Queue[Note | Listed | TaskExited] = asyncio.Queue()
    events = relisted_events(channel, notes, period=60.0)
    first = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0.05)
    assert runtime.relists == 1 and not first.done()  # the first relist; the next is a minute away
    notes.put_nowait(TaskExited("unknown"))  # not a container CRI listed: no chase
    await asyncio.sleep(0.1)
    assert runtime.relists == 1
    notes.put_nowait(TaskExited("c"))
    await asyncio.sleep(0.1)  # CRI still says running: relisted every CHASE_PERIOD
    assert runtime.relists > 3 and not first.done()
    runtime.state = pb.CONTAINER_EXITED
    event = await asyncio.wait_for(first, 5)
    assert (event.container_id, event.type, event.pod_uid) == ("c", STOPPED, "u")
    settled = runtime.relists
    pending = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0.1)
    assert runtime.relists == settled  # CRI agreed: back to the period
    pending.cancel()
    await asyncio.gather(pending, return_exceptions=True)
    await events.aclose()


async def test_the_clients_own_listings_stand_in_for_the_streams_relist() -> None:
    """One relist, not two: while the client lists (the PLEG's relist, every second), the stream turns those
    listings into events and lists nothing itself; it relists alone once no listing came for its period."""
    runtime = ScriptedRuntime()
    channel = cast(Channel, SimpleNamespace(runtime=runtime))
    notes: asyncio.Queue[Note | Listed | TaskExited] = asyncio.Queue()
    events = relisted_events(channel, notes, period=0.3)
    first = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0.05)
    assert runtime.relists == 1
    loop = asyncio.get_running_loop()
    running = {"s": Seen(2, "u", True), "c": Seen(2, "u", False)}
    for _ in range(8):  # 0.8 s of listings every 0.1 s: more than two of the stream's periods
        notes.put_nowait(Listed(running, loop.time()))
        await asyncio.sleep(0.1)
    assert runtime.relists == 1 and not first.done()
    notes.put_nowait(Listed({**running, "c": Seen(3, "u", False)}, loop.time()))
    event = await asyncio.wait_for(first, 5)
    assert (event.container_id, event.type, event.pod_uid) == ("c", STOPPED, "u")
    assert runtime.relists == 1
    pending = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0.5)  # no listing for longer than the period: the stream's own relist
    assert runtime.relists >= 2
    pending.cancel()
    await asyncio.gather(pending, return_exceptions=True)
    await events.aclose()
