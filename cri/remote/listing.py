"""The cheap listing (ListPodSandbox + ListContainers) behind the PLEG relist and the stats pass, as summaries.

An idle node lists the same objects every second; comparing the two replies with the last ones (the protobuf
runtime's own equality, in C) costs a fraction of converting ~200 messages, so an unchanged pair of replies hands
back the summaries converted last time: the same objects, which the PLEG takes as "nothing changed". Neither reply
holds a field that moves with the clock (a sandbox's or container's `created_at` is fixed).
"""

from __future__ import annotations

from cri.remote import convert
from cri.remote.events import Seen, snapshot
from cri.remote.v1 import api_pb2 as pb
from cri.types import ObjectSummary


class SummaryListing:
    def __init__(self) -> None:
        self._last: tuple[pb.ListPodSandboxResponse, pb.ListContainersResponse] | None = None
        self._summaries: tuple[ObjectSummary, ...] = ()
        self._seen: dict[str, Seen] | None = None
        self.conversions = 0

    def summaries(self, sandboxes: pb.ListPodSandboxResponse,
                  containers: pb.ListContainersResponse) -> list[ObjectSummary]:
        last = self._last
        if last is None or last[0] != sandboxes or last[1] != containers:
            self._summaries = (tuple(convert.summary_of_sandbox(s) for s in sandboxes.items)
                               + tuple(convert.summary_of_container(c) for c in containers.containers))
            self._last = (sandboxes, containers)
            self._seen = None
            self.conversions += 1
        return list(self._summaries)

    def seen(self) -> dict[str, Seen]:
        """The last listing as the relisting event stream's trackers read it (not to be changed: it is shared)."""
        if self._seen is None:
            assert self._last is not None, "seen() before a listing"
            self._seen = snapshot(list(self._last[0].items), list(self._last[1].containers))
        return self._seen
