"""The cheap listing (ListPodSandbox + ListContainers) behind the PLEG relist and the stats pass, as summaries.

An idle node lists the same objects every second (containerd in another order each time); comparing the two
replies, sorted by id, with the last ones (the protobuf runtime's own equality, in C) costs a fraction of converting
~200 messages, so an unchanged pair of replies hands back the summaries converted last time: the same objects,
which the PLEG takes as "nothing changed". Neither reply holds a field that moves with the clock (a sandbox's or
container's `created_at` is fixed).
"""

from __future__ import annotations

from cri.remote import convert
from cri.remote.events import Seen, snapshot
from cri.remote.v1 import api_pb2 as pb
from cri.types import ObjectSummary


class SummaryListing:
    def __init__(self) -> None:
        self._last: tuple[list[pb.PodSandbox], list[pb.Container]] | None = None
        self._summaries: tuple[ObjectSummary, ...] = ()
        self._seen: dict[str, Seen] | None = None
        self.conversions = 0

    def summaries(self, sandboxes: pb.ListPodSandboxResponse,
                  containers: pb.ListContainersResponse) -> list[ObjectSummary]:
        # containerd lists from its stores' maps, in a different order each time: compared and kept by id
        listed = (sorted(sandboxes.items, key=_id), sorted(containers.containers, key=_id))
        last = self._last
        if last is None or last[0] != listed[0] or last[1] != listed[1]:
            self._summaries = (tuple(convert.summary_of_sandbox(s) for s in listed[0])
                               + tuple(convert.summary_of_container(c) for c in listed[1]))
            self._last = listed
            self._seen = None
            self.conversions += 1
        return list(self._summaries)

    def seen(self) -> dict[str, Seen]:
        """The last listing as the relisting event stream's trackers read it (not to be changed: it is shared)."""
        if self._seen is None:
            assert self._last is not None, "seen() before a listing"
            self._seen = snapshot(self._last[0], self._last[1])
        return self._seen


def _id(item: pb.PodSandbox | pb.Container) -> str:
    return item.id
