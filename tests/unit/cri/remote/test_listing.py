"""The CRI client's cheap listing: an unchanged pair of replies hands back the summaries (and the event stream's
view) converted last time; any change converts again."""

from __future__ import annotations

from cri.remote.events import Seen
from cri.remote.listing import SummaryListing
from cri.remote.v1 import api_pb2 as pb
from cri.types import LABEL_POD_UID


def replies(state: pb.ContainerState.ValueType = pb.CONTAINER_RUNNING, extra: bool = False) -> tuple[pb.ListPodSandboxResponse,
                                                                             pb.ListContainersResponse]:
    sandboxes = [pb.PodSandbox(id="sb1", metadata=pb.PodSandboxMetadata(name="web", uid="u1", namespace="default"),
                               state=pb.SANDBOX_READY, created_at=1, labels={LABEL_POD_UID: "u1", "app": "web"})]
    containers = [pb.Container(id="c1", pod_sandbox_id="sb1", metadata=pb.ContainerMetadata(name="main"),
                               state=state, created_at=2, labels={LABEL_POD_UID: "u1"})]
    if extra:
        containers.append(pb.Container(id="c2", pod_sandbox_id="sb1", metadata=pb.ContainerMetadata(name="side"),
                                       state=pb.CONTAINER_CREATED, created_at=3, labels={LABEL_POD_UID: "u1"}))
    # decoded from the wire as each call's reply is: equal messages, never the same objects
    return (pb.ListPodSandboxResponse.FromString(pb.ListPodSandboxResponse(items=sandboxes).SerializeToString()),
            pb.ListContainersResponse.FromString(pb.ListContainersResponse(containers=containers).SerializeToString()))


def test_equal_replies_hand_back_the_last_summaries() -> None:
    listing = SummaryListing()
    first = listing.summaries(*replies())
    assert [(s.id, s.pod_uid, s.state, s.is_sandbox) for s in first] == [
        ("sb1", "u1", "running", True), ("c1", "u1", "running", False)]
    seen = listing.seen()
    assert seen == {"sb1": Seen(2, "u1", True), "c1": Seen(2, "u1", False)}
    again = listing.summaries(*replies())
    assert all(a is b for a, b in zip(first, again, strict=True)) and listing.conversions == 1
    assert listing.seen() is seen


def test_the_same_objects_listed_in_another_order_are_unchanged() -> None:
    listing = SummaryListing()
    sandboxes, containers = replies(extra=True)
    first = listing.summaries(sandboxes, containers)
    reordered = pb.ListContainersResponse(containers=list(reversed(containers.containers)))
    again = listing.summaries(sandboxes, reordered)
    assert all(a is b for a, b in zip(first, again, strict=True)) and listing.conversions == 1
    assert [s.id for s in again] == ["sb1", "c1", "c2"]  # sandboxes first, each kind by id


def test_any_change_converts_again() -> None:
    listing = SummaryListing()
    first = listing.summaries(*replies())
    seen = listing.seen()
    exited = listing.summaries(*replies(state=pb.CONTAINER_EXITED))
    assert exited[1].state == "exited" and exited[1] is not first[1] and listing.conversions == 2
    assert listing.seen() is not seen and listing.seen()["c1"].steps == 3
    more = listing.summaries(*replies(state=pb.CONTAINER_EXITED, extra=True))
    assert [s.id for s in more] == ["sb1", "c1", "c2"] and listing.conversions == 3
    assert set(listing.seen()) == {"sb1", "c1", "c2"}
