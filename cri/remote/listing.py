"""The cheap listing (ListPodSandbox + ListContainers) behind the PLEG relist and the stats pass, as summaries.

An idle node lists the same objects every second (containerd in another order each time). Each object serialized
by the protobuf runtime (in C), sorted by id, and compared with the last listing's bytes costs a fraction of
converting ~200 messages, so an unchanged pair of replies hands back the summaries converted last time: the same
objects, which the PLEG takes as "nothing changed". Neither reply holds a field that moves with the clock (a
sandbox's or container's `created_at` is fixed).
"""

from __future__ import annotations

from collections.abc import Sequence

from cri.remote import convert
from cri.remote.events import Seen, snapshot
from cri.remote.v1 import api_pb2 as pb
from cri.types import ObjectSummary


class SummaryListing:
    def __init__(self) -> None:
        # the replies' bytes (each object serialized deterministically, sorted by id) rather than the messages:
        # ~80 KB at 100 pods where holding the decoded messages took ~270 KB
        self._last: tuple[bytes, bytes] | None = None
        self._summaries: tuple[ObjectSummary, ...] = ()
        self._seen: dict[str, Seen] = {}
        self.conversions = 0

    def summaries(self, sandboxes: pb.ListPodSandboxResponse,
                  containers: pb.ListContainersResponse) -> list[ObjectSummary]:
        # containerd lists from its stores' maps, in a different order each time: compared and kept by id
        listed_sandboxes, listed_containers = sorted(sandboxes.items, key=_id), sorted(containers.containers, key=_id)
        key = (_key(listed_sandboxes), _key(listed_containers))
        if key != self._last:
            self._summaries = (tuple(convert.summary_of_sandbox(s) for s in listed_sandboxes)
                               + tuple(convert.summary_of_container(c) for c in listed_containers))
            self._seen = snapshot(listed_sandboxes, listed_containers)
            self._last = key
            self.conversions += 1
        return list(self._summaries)

    def seen(self) -> dict[str, Seen]:
        """The last listing as the relisting event stream's trackers read it (not to be changed: it is shared)."""
        return self._seen


def _id(item: pb.PodSandbox | pb.Container) -> str:
    return item.id


def _key(items: Sequence[pb.PodSandbox] | Sequence[pb.Container]) -> bytes:
    parts: list[bytes] = []
    for item in items:
        data = item.SerializeToString(deterministic=True)
        parts += (len(data).to_bytes(4, "little"), data)
    return b"".join(parts)
