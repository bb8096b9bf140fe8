"""What a pod worker's last sync saw of its pod in the runtime (upstream's pod cache, kept per pod): each sandbox
and container by id, the step of its life it was in, and when it was read. The PLEG reports runtime changes as
facts (an event about one object, or a relist's listing of the pod); a fact this already reflects brings no
sync forward. Upstream's PLEG reads the pod once into its cache and the worker syncs from that; here the worker
reads, and the PLEG does not make it read again what it has just read: the worker's own creates and starts
otherwise came back as events and relist changes and cost the pod a second relist.

A fact is reflected when the object is in the same step here (created, running, exited), or when it was read
here after the fact was known (the read was sent after the event arrived or after the relist's listing came
back: a later read of the runtime shows at least as much). Anything else (an object not seen here, an object
gone, a step that went back) brings the sync forward, as every fact did before."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cri.types import ContainerEventType, ContainerState, SandboxState
from minikubelet.runtime.state import PodRuntimeState

CREATED, RUNNING, EXITED = 1, 2, 3
_WORDS = {"created": CREATED, "running": RUNNING, "paused": RUNNING, "exited": EXITED, "dead": EXITED}
_EVENTS = {ContainerEventType.CREATED: CREATED, ContainerEventType.STARTED: RUNNING,
           ContainerEventType.STOPPED: EXITED}
_CONTAINERS = {ContainerState.CREATED: CREATED, ContainerState.RUNNING: RUNNING, ContainerState.EXITED: EXITED}


@dataclass(frozen=True)
class ObjectEvent:
    """The runtime's event about one object of the pod, and when it reached the agent (clock.monotonic)."""

    object_id: str
    type: ContainerEventType
    arrived: float


@dataclass(frozen=True)
class PodListing:
    """A relist's (object id, the runtime's state word) for the pod, and when its listing came back."""

    objects: frozenset[tuple[str, str]]
    listed: float


RuntimeFact = ObjectEvent | PodListing


@dataclass(frozen=True)
class SeenPod:
    objects: Mapping[str, tuple[int, float]]  # object id -> (step, read at: clock.monotonic before the read)

    @classmethod
    def of(cls, state: PodRuntimeState) -> SeenPod:
        objects: dict[str, tuple[int, float]] = {}
        for s in state.sandboxes:
            objects[s.id] = (RUNNING if s.state is SandboxState.READY else EXITED, state.read_at.get(s.id, 0.0))
        for c in state.containers:
            objects[c.id] = (_CONTAINERS.get(c.state, 0), state.read_at.get(c.id, 0.0))
        return cls(objects)

    def reflects(self, fact: RuntimeFact) -> bool:
        if isinstance(fact, ObjectEvent):
            seen = self.objects.get(fact.object_id)
            return seen is not None and (seen[1] > fact.arrived or _same_or_older(_EVENTS.get(fact.type, -1), seen[0]))
        listed = dict(fact.objects)
        for object_id, word in listed.items():
            seen = self.objects.get(object_id)
            if seen is None or not (seen[1] > fact.listed or _same_or_older(_WORDS.get(word, -1), seen[0])):
                return False
        # seen here but not listed: created after the listing (read after it), else gone since
        return all(read_at > fact.listed for object_id, (_, read_at) in self.objects.items() if object_id not in listed)


    def listed_as(self, objects: frozenset[tuple[str, str]]) -> bool:
        """A listing shows exactly these objects, each in the step seen here."""
        return len(objects) == len(self.objects) and all(
            (seen := self.objects.get(object_id)) is not None and _WORDS.get(word, -1) == seen[0]
            for object_id, word in objects)


@dataclass(frozen=True)
class CachedPod:
    """The pod as a worker's last sync left it (nothing more to do), what that shows, and when the sync ended:
    the next sync reads it instead of the runtime when a later relist listed the pod the same (upstream's
    syncPod reads the PLEG's cache, newer than the last sync)."""

    state: PodRuntimeState
    seen: SeenPod
    synced_at: float  # clock.monotonic


def _same_or_older(step: int, seen: int) -> bool:
    """The fact's step is the one seen, or a creation (an object is created once: old news to anything that saw
    it). A start after an exit is news: the same container can be started again."""
    return step == seen or (step == CREATED and seen > 0)
