"""Pod lifecycle event generator: the runtime's event stream, with a periodic relist as safety net."""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Callable, Sequence

from cri.runtime import Runtime
from cri.types import ObjectSummary
from minikubelet.base.clock import Clock
from minikubelet.metrics import Metrics
from minikubelet.runtime.pod_cache import ObjectEvent, PodListing, RuntimeFact, SeenPod

log = logging.getLogger("minikubelet.runtime.pleg")


# the runtimes' state words as the kubelet's container states (created, running, exited, unknown); Docker's paused
# container is running to cri-dockerd, its dead one exited
_STATES = {"created": "created", "running": "running", "paused": "running", "exited": "exited", "dead": "exited"}


def container_state(word: str) -> str:
    return _STATES.get(word, "unknown")


class PLEG:
    def __init__(self, runtime: Runtime, clock: Clock, metrics: Metrics, wake: Callable[[str], None],
                 relist_period: float = 1.0, changed: Callable[[str, RuntimeFact], None] | None = None) -> None:
        """`changed(uid, fact)`: what the PLEG saw of a pod, for its worker to tell whether it has seen it
        already; without it, `wake(uid)`."""
        self._runtime = runtime
        self._clock = clock
        self._metrics = metrics
        self._changed = changed or (lambda uid, _fact: wake(uid))
        self.relist_period = relist_period
        self._seen: dict[str, frozenset[tuple[str, str]]] = {}
        self.last_relist = 0.0  # monotonic; 0 = never
        self._last_start: float | None = None  # when the last successful relist began (time.monotonic)
        self.runtime_uids: dict[str, dict[str, str]] = {}  # uid -> labels of one of its objects
        self.running_uids: frozenset[str] = frozenset()  # pods with a running container or a ready sandbox
        self._container_states: set[str] = set()
        self._listed_from = 0.0  # clock.monotonic before the last successful relist's listing was asked for
        self._last_listing: tuple[ObjectSummary, ...] = ()

    async def relist(self) -> None:
        t0 = time.monotonic()
        # as upstream: from the start of the last relist that listed the runtime to the start of this one
        if self._last_start is not None:
            self._metrics.node.pleg_relist_interval.observe(t0 - self._last_start)
        current: dict[str, set[tuple[str, str]]] = {}
        uids: dict[str, dict[str, str]] = {}
        running_pods: set[str] = set()
        running: set[str] = set()
        states = dict.fromkeys(self._container_states, 0)
        asked = self._clock.monotonic()
        summaries = await self._runtime.list_summaries()
        listed = self._clock.monotonic()
        self._last_start = t0
        if self._unchanged(summaries):
            self._relisted(asked, t0)
            return
        for obj in summaries:
            if not obj.pod_uid:
                continue
            current.setdefault(obj.pod_uid, set()).add((obj.id, obj.state))
            if obj.is_sandbox or obj.pod_uid not in uids:
                uids[obj.pod_uid] = dict(obj.labels)
            if obj.is_sandbox:
                if container_state(obj.state) == "running":
                    running_pods.add(obj.pod_uid)
            else:
                state = container_state(obj.state)
                states[state] = states.get(state, 0) + 1
                if state == "running":
                    running.add(obj.pod_uid)
        # upstream's generic PLEG counts these from each relist; a state seen once stays exposed (0 when empty)
        for state, count in states.items():
            self._metrics.running_containers.labels(state).set(count)
        self._container_states = set(states)
        self._metrics.running_pods.set(len(running_pods))
        frozen = {uid: frozenset(v) for uid, v in current.items()}
        for uid in set(frozen) | set(self._seen):
            if (objects := frozen.get(uid, frozenset())) != self._seen.get(uid):
                self._changed(uid, PodListing(objects, listed))
        self._seen = frozen
        self.runtime_uids = uids
        self.running_uids = frozenset(running | running_pods)
        self._last_listing = tuple(summaries)
        self._relisted(asked, t0)

    def _unchanged(self, summaries: Sequence[ObjectSummary]) -> bool:
        """The runtimes' listings hand back the summaries of their last decode while nothing a summary holds
        changed (a summary is frozen): the same objects in the same order are the listing this PLEG last
        compared, so there is nothing to diff, count or tell (the idle node's every relist)."""
        last = self._last_listing
        return bool(last) and len(summaries) == len(last) and all(map(operator.is_, summaries, last))

    def _relisted(self, asked: float, t0: float) -> None:
        self._listed_from = asked
        self.last_relist = self._clock.monotonic()
        self._metrics.pleg_last_seen.set(int(self._clock.now()))
        self._metrics.pleg_relist_duration.observe(time.monotonic() - t0)

    @property
    def listed_from(self) -> float:
        """clock.monotonic before the last successful relist asked the runtime for its listing."""
        return self._listed_from

    def confirms(self, uid: str, seen: SeenPod, since: float) -> bool:
        """A relist asked after `since` listed the pod as `seen` shows it (upstream's pod cache is newer than
        the worker's last sync and the PLEG saw no change since)."""
        return self._listed_from > since and seen.listed_as(self._seen.get(uid, frozenset()))

    async def run_relist(self) -> None:
        while True:
            try:
                await self.relist()
            except Exception as e:  # the runtime being away must not kill the loop
                log.warning("relist failed", extra={"kv": {"err": str(e)}})
            await self._clock.sleep(self.relist_period)

    async def run_events(self) -> None:
        while True:
            try:
                async for event in self._runtime.events():
                    if event.pod_uid:
                        self._changed(event.pod_uid,
                                      ObjectEvent(event.container_id, event.type, self._clock.monotonic()))
                log.warning("runtime event stream ended; subscribing again")
            except Exception as e:  # a broken stream must not end the agent; relists cover the gap
                log.warning("runtime event stream failed", extra={"kv": {"err": str(e)}})
            await self._clock.sleep(self.relist_period)
