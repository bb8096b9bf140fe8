"""The test API server inside the simulation: its registry, store and Node authorizer (tests/apiserver/, which
behave as the recorded kube-apiserver) answer the agent's real API client (kubeapi.rest.RestClient) through a
transport that calls them directly, on the simulation's clock: no sockets, no real time. Only HTTP is left out
(aiohttp's request parsing and the TLS); everything from the client's retries and timeouts to the registry's
graceful delete, uid preconditions and 410 on a compacted watch is the real code.

Faults, as the workload injects them: the API server unreachable (connections refused, open watches cut) or hung
(requests and watches wait, the client's timeouts fire), its watch history compacted (410 Gone), status writes
answered 409 Conflict, watches late by a delay."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import random
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from fractions import Fraction
from typing import Any
from urllib.parse import parse_qsl

import h11

from minikubelet.base import podview
from minikubelet.base.clock import FakeClock
from minikubelet.base.http1 import ConnectFailed
from minikubelet.base.podview import Pod
from minikubelet.kubeapi.kubeconfig import ClientConfig
from minikubelet.kubeapi.rest import RestClient
from minikubelet.kubeapi.transport import Response, Transport
from minikubelet.node.lease import NodeLease
from minikubelet.node.lister import NodeLister
from minikubelet.node.machine import MachineInfo
from minikubelet.node.registration import NodeRegistration, initial_node
from minikubelet.node.status import NodeStatusInputs
from minikubelet.node.status_updater import NodeStatusUpdater
from minikubelet.pod.manager import PodManager
from minikubelet.pod.mirror import MirrorPods
from minikubelet.services.api_pods import source_api_pod, static_pods
from minikubelet.sources.apiserver import ApiserverPodSource
from minikubelet.status.api_sync import PodStatusSync
from minikubelet.worker.lifecycle import PodLifecycle
from minikubelet.worker.workers import PodWorkers
from tests.apiserver import errors, registry, selectors, store
from tests.apiserver.auth import User
from tests.apiserver.authz import Attributes, Authorizer
from tests.apiserver.registry import Registry
from tests.apiserver.resources import resource
from tests.apiserver.server import parse_path
from tests.apiserver.store import Store, TooOld, Watch
from tests.apiserver.watch import bookmark, dumps
from tests.sim.workload import NODE

Json = dict[str, Any]
NODE_USER = User(f"system:node:{NODE}", ("system:nodes", "system:authenticated"))
ADMIN = User("kubernetes-admin", ("system:masters", "system:authenticated"))
HISTORY = 200  # the watch cache's window: small, so a long outage can also end in a 410 without an injection
PODS = resource("pods")


class _Stamped(asyncio.Queue[Any]):
    """A watch's queue that notes when each event happened (a slow watch delivers it that much later)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self._clock = clock

    def put_nowait(self, item: Any) -> None:
        super().put_nowait(None if item is None else (self._clock.monotonic(), *item))


class SimApi:
    """The API server's state and the faults between it and the agent."""

    def __init__(self, clock: FakeClock, seed: int) -> None:
        self.clock = clock
        self._uuids = random.Random(seed ^ 0x5EED)
        self._patches: list[tuple[Any, str, Any]] | None = None
        with self.deterministic():
            self.store = Store(history=HISTORY)
            self.registry = Registry(self.store, b"sim-ca")
        self.authorizer = Authorizer(self.store)
        self.down = 0  # outages under way: connections refused
        self.hung = 0  # hangs under way: requests wait
        self._unhung = asyncio.Event()
        self._unhung.set()
        self.conflicts = 0  # the next status writes answered 409 Conflict
        self.watch_delay = 0.0
        self.streams: dict[_Stream, None] = {}  # in opening order, not memory-address order
        self.reachable_since = 0.0  # monotonic: the API has answered since then without a fault
        self.requests = 0
        self.expired = 0  # watches answered 410 Gone

    # -- time and ids from the simulation ----------------------------------------------------------------
    @contextlib.contextmanager
    def deterministic(self) -> Iterator[None]:
        """The registry's timestamps on the simulation's clock and its uids from the seed."""
        patches = self._patches
        if patches is None:
            patches = self._patches = self._make_patches()
        saved = [(m, name, getattr(m, name)) for m, name, _v in patches]
        for m, name, value in patches:
            setattr(m, name, value)
        try:
            yield
        finally:
            for m, name, value in saved:
                setattr(m, name, value)

    def _make_patches(self) -> list[tuple[Any, str, Any]]:
        """Made once per run: a class per request cost more than the request's own work."""
        def now() -> str:
            return _rfc3339(self.clock.now())

        def later(seconds: int) -> str:
            return _rfc3339(self.clock.now() + seconds)

        rng = self._uuids
        ids = type("Ids", (), {"uuid4": staticmethod(lambda: uuid.UUID(int=rng.getrandbits(128), version=4))})
        return [(store, "now_rfc3339", now), (registry, "now_rfc3339", now), (registry, "_later", later),
                (store, "uuid", ids)]

    # -- faults -------------------------------------------------------------------------------------------
    @property
    def reachable(self) -> bool:
        return not self.down and not self.hung

    def outage(self, seconds: float, hang: bool) -> None:
        """Unreachable (refused, watches cut) or hung (everything waits) for `seconds`."""
        if hang:
            self.hung += 1
            self._unhung.clear()
        else:
            self.down += 1
            self.cut_watches()
        asyncio.get_running_loop().call_later(seconds, self._back, hang)

    def _back(self, hang: bool) -> None:
        if hang:
            self.hung -= 1
            if not self.hung:
                self._unhung.set()
        else:
            self.down -= 1
        if self.reachable:
            self.reachable_since = self.clock.monotonic()

    def gone(self) -> None:
        """Every watch is cut, the cluster moves on (a write elsewhere) and the watch cache's history is compacted:
        the resume from the last resourceVersion the agent saw gets 410 Gone, and the source relists."""
        self.cut_watches()
        with self.deterministic():
            tick = self.store.get("configmaps", "kube-system", "sim-tick")
            if tick is None:
                self.store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                    "name": "sim-tick", "namespace": "kube-system"}, "data": {"n": "0"}})
            else:
                tick["data"] = {"n": str(int(tick["data"]["n"]) + 1)}
                self.store.update("configmaps", tick)
        self.store.compact()

    def cut_watches(self) -> None:
        for s in list(self.streams):
            s.cut()

    async def gate(self) -> None:
        if self.down:
            raise ConnectFailed("connection refused (simulated outage)")
        await self._unhung.wait()
        if self.down:
            raise ConnectFailed("connection refused (simulated outage)")

    # -- requests ------------------------------------------------------------------------------------------
    def call(self, user: User, method: str, target: str, body: bytes | None) -> tuple[int, Json]:
        self.requests += 1
        path, _, qs = target.partition("?")
        query = dict(parse_qsl(qs))
        try:
            with self.deterministic():
                return self._call(user, method, path, query, json.loads(body) if body else {})
        except errors.ApiError as e:
            return e.code, e.body

    def _call(self, user: User, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Json]:
        info = parse_path(method, path, query)
        if info is None or info.res is None or info.verb == "watch":
            raise errors.ApiError(errors.status(404, "NotFound", "the server could not find the requested resource"))
        res, ns, name = info.res, info.namespace, info.name
        match, fields = selectors.field_selector(res.plural, query.get("fieldSelector", "")) \
            if info.verb == "list" else ((lambda _o: True), {})
        # a list names its object through the field selector, as the server's dispatch reads it
        self.authorize(Attributes(user, info.verb, path, res.plural, info.sub, res.group, ns,
                                  name or fields.get("metadata.name", ""), fields))
        reg = self.registry
        if info.verb == "get":
            return 200, reg.get(res, ns, name)
        if info.verb == "list":
            return 200, reg.list_objects(res, ns, match, query.get("resourceVersion", ""), "")
        if info.verb == "patch":
            if info.sub == "status" and self.conflicts > 0:
                self.conflicts -= 1
                raise errors.conflict(res, name)
            return 200, reg.patch(user, res, ns, name, body, "application/strategic-merge-patch+json", info.sub,
                                  path).obj
        if info.verb == "delete":
            return 200, reg.delete(user, res, ns, name, body if isinstance(body, dict) else {})
        if info.verb == "create":
            return 201, reg.create(user, res, ns, body, path).obj
        if info.verb == "update":
            return 200, reg.update(user, res, ns, name, body, info.sub, path).obj
        raise errors.method_not_allowed()

    def authorize(self, a: Attributes) -> None:
        allowed, reason = self.authorizer.authorize(a)
        if not allowed:
            raise errors.forbidden(PODS if a.resource == "pods" else None, a.name, a.forbidden_message() + reason)

    def watch(self, user: User, target: str) -> tuple[int, bytes, _Stream | None]:
        path, _, qs = target.partition("?")
        query = dict(parse_qsl(qs))
        info = parse_path("GET", path, query)
        try:
            if info is None or info.res is None or info.verb != "watch":
                raise errors.bad_request("not a watch")
            match, fields = selectors.field_selector(info.res.plural, query.get("fieldSelector", ""))
            self.authorize(Attributes(user, "watch", path, info.res.plural, "", info.res.group, info.namespace,
                                      fields.get("metadata.name", ""), fields))
        except errors.ApiError as e:
            return e.code, dumps(e.body), None
        rv = query.get("resourceVersion", "")
        timeout = float(query.get("timeoutSeconds", "300"))
        w = Watch(info.res.plural, info.namespace or None, match, _Stamped(self.clock))
        first: list[bytes] = []
        try:
            if rv in ("", "0"):
                first = [dumps({"type": "ADDED", "object": o}) + b"\n"
                         for o in self.store.list_objects(info.res.plural, info.namespace or None) if match(o)]
            else:
                for change in self.store.changes_since(int(rv)):
                    w.offer(change)
        except TooOld as e:
            self.expired += 1
            first = [dumps({"type": "ERROR", "object": errors.expired(str(e)).body}) + b"\n"]
            return 200, b"".join(first), None
        self.store.watches[w] = None
        stream = _Stream(self, w, first, self.clock.monotonic() + timeout)
        self.streams[stream] = None
        return 200, b"", stream

    # -- the workload's own requests (an admin, not through the agent's faults) -----------------------------
    def admin(self, method: str, path: str, body: Json | None = None) -> tuple[int, Json]:
        return self.call(ADMIN, method, path, json.dumps(body).encode() if body is not None else None)

    def pods(self) -> dict[str, Json]:
        """uid -> the pod as stored (the store's own objects, read only: a copy each step would cost more than the
        rest of the check)."""
        stored = self.store._objects.get("pods", {})
        return {podview.uid(stored[k]): stored[k] for k in sorted(stored)}


class _Stream:
    """One open watch: its events, late by the API's watch delay, until the server's timeout or a cut."""

    def __init__(self, api: SimApi, watch: Watch, first: list[bytes], deadline: float) -> None:
        self.api = api
        self.w = watch
        self.first = first
        self.deadline = deadline

    def cut(self) -> None:
        self.w.queue.put_nowait(None)

    def close(self) -> None:
        self.api.store.close_watch(self.w)
        self.api.streams.pop(self, None)

    async def pieces(self, idle_timeout: float | None) -> AsyncIterator[bytes]:
        for line in self.first:
            yield line
        clock = self.api.clock
        while True:
            wait = self.deadline - clock.monotonic()
            if idle_timeout is not None:
                wait = min(wait, idle_timeout)
            if wait <= 0:
                break
            try:
                item: Any = await asyncio.wait_for(self.w.queue.get(), wait)  # stamped by _Stamped
            except TimeoutError:
                break
            if item is None:
                raise ConnectionResetError("watch connection cut (simulated)")
            at, kind, obj = item
            if (late := at + self.api.watch_delay - clock.monotonic()) > 0:
                await clock.sleep(late)
            await self.api.gate()
            yield dumps({"type": kind, "object": obj}) + b"\n"
        if clock.monotonic() < self.deadline:
            raise TimeoutError  # the client's idle timeout
        # the server ends the watch at its timeout, with a bookmark of where it got to: after the events still
        # queued (a bookmark past an undelivered event would lose it for good)
        while not self.w.queue.empty():
            left: Any = self.w.queue.get_nowait()  # stamped by _Stamped
            if left is None:
                raise ConnectionResetError("watch connection cut (simulated)")
            yield dumps({"type": left[1], "object": left[2]}) + b"\n"
        yield dumps(bookmark(resource(self.w.resource), self.api.store.rv)) + b"\n"


class _SimResponse(Response):
    def __init__(self, status: int, body: bytes, stream: _Stream | None = None) -> None:
        self.status = status
        self.head = h11.Response(status_code=status, headers=[("Content-Type", "application/json")])
        self._body = body
        self._stream = stream

    async def pieces(self, idle_timeout: float | None = None) -> AsyncIterator[bytes]:
        if self._body:
            yield self._body
        if self._stream is not None:
            async for piece in self._stream.pieces(idle_timeout):
                yield piece


class SimTransport(Transport):
    """kubeapi.transport.Transport's two calls, answered by the SimApi as the node's user."""

    def __init__(self, api: SimApi) -> None:  # no pool, no sockets
        self.api = api

    async def request(self, method: str, target: str, headers: dict[str, str], body: bytes | None,
                      limit: int) -> tuple[Response, bytes]:
        await self.api.gate()
        code, doc = self.api.call(NODE_USER, method, target, body)
        raw = dumps(doc) + b"\n"
        return _SimResponse(code, raw), raw

    @contextlib.asynccontextmanager
    async def stream(self, target: str, headers: Any, head_timeout: float) -> AsyncIterator[Response]:
        await self.api.gate()
        code, body, stream = self.api.watch(NODE_USER, target)
        try:
            yield _SimResponse(code, body, stream)
        finally:
            if stream is not None:
                stream.close()

    def close(self) -> None:
        self.api.cut_watches()


class SimClient(RestClient):
    def __init__(self, api: SimApi, clock: FakeClock) -> None:
        super().__init__(ClientConfig(server="https://sim-apiserver"), clock)
        self._sim = SimTransport(api)

    async def _get_transport(self) -> Transport:
        return self._sim


class ApiAgent:
    """The agent's API half as services/api_pods.py wires it: the API pod source (list + watch into the source
    merge; the mirror pods it hands to the mirror pod manager, not the merge), the status manager's API sync (PATCH
    status, the final DELETE; a static pod's status to its mirror pod), the mirror pods of the static pods, and as
    the join wires them the node's registration and status updates and its Lease heartbeat."""

    def __init__(self, api: SimApi, clock: FakeClock, statuses: Any, manager: PodManager, workers: PodWorkers,
                 max_pods: int, set_source_pods: Callable[[str, list[Pod]], None]) -> None:
        self.client = SimClient(api, clock)
        self._workers = workers
        self.mirrors = MirrorPods(self.client, clock, NODE, lambda: static_pods(manager, workers))
        manager.mirror_count = lambda: len(self.mirrors.mirrors)
        self.source = ApiserverPodSource(self.client, NODE, clock, set_source_pods, max_pods=10 * max_pods,
                                         mirrors=self.mirrors.set_mirror_pods)
        self.status_sync = PodStatusSync(self.client, clock, statuses, self.terminated,
                                         source_pod=lambda pod: source_api_pod(self.source, self.mirrors, pod))
        self.lease = NodeLease(self.client, clock, NODE)
        self.registration = NodeRegistration(self.client, clock, NODE, self._node)
        self.node_status = NodeStatusUpdater(self.client, clock, self.registration, self._inputs)
        self.node_lister = NodeLister(self.client, NODE, clock)
        self.node_status.cached = self.node_lister.current_object  # the status update's first read (as upstream)
        self._max_pods = max_pods

    async def run_source(self) -> None:
        """As ApiPods: the pods are watched once the node's own object has synced."""
        await self.node_lister.synced.wait()
        await self.source.run()

    async def _node(self) -> Json:
        return initial_node(NODE, {}, ())

    async def _inputs(self) -> NodeStatusInputs:
        return NodeStatusInputs(hostname=NODE, node_ip="10.0.0.1", machine=MachineInfo(), capacity={
            "cpu": Fraction(2), "memory": Fraction(4 << 30), "ephemeral-storage": Fraction(20 << 30),
            "pods": Fraction(self._max_pods)}, reservation={}, runtime_type="fake", runtime_version="0.1.0",
            kubelet_version="v1.36.0")

    def terminated(self, uid: str) -> bool:
        """agent._pod_terminated: nothing of the pod can run any more."""
        w = self._workers.get(uid)
        return w is None or w.lifecycle is PodLifecycle.TERMINATED


def _rfc3339(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
