"""Mirror pods against the test API server (its NodeRestriction checks what a node may create): created
with the recorded annotations and owner reference, re-created when deleted, replaced when stale, deleted
with the static pod (after it stopped), and the static pod's status written through its mirror."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from minikubelet.base import podview
from minikubelet.base.clock import FakeClock, RealClock
from minikubelet.kubeapi.rest import RestClient
from minikubelet.pod.mirror import MIRROR_ANNOTATION, MirrorPods, StaticPod
from minikubelet.sources.apiserver import ApiserverPodSource
from minikubelet.sources.static_pod import make_static_pod
from minikubelet.status.api_sync import PodStatusSync
from minikubelet.status.manager import StatusManager
from tests.apiserver import ApiServer
from tests.apiserver.fixtures import api_server  # noqa: F401
from tests.unit.kubeapi.helpers import client_for, eventually

NODE = "n1"


def _static(image: str = "busybox:1.35") -> dict[str, Any]:
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "kube-system",
                                                                  "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "main", "image": image}]}}
    return make_static_pod(manifest, NODE, "/etc/kubernetes/manifests/web.yaml", seen=1_700_000_000.0)


class World:
    def __init__(self, api: ApiServer, client: RestClient) -> None:
        self.api = api
        self.client = client
        self.statics: list[StaticPod] = []
        self.mirrors = MirrorPods(client, RealClock(), NODE, lambda: self.statics)
        self.source = ApiserverPodSource(client, NODE, RealClock(), lambda _s, _p: None,
                                         mirrors=self.mirrors.set_mirror_pods)
        self.tasks = [asyncio.create_task(self.source.run()), asyncio.create_task(self.mirrors.run())]

    async def mirror(self) -> dict[str, Any] | None:
        items = (await self.api.admin().list("pods", "kube-system"))["items"]
        return next((p for p in items if p["metadata"]["name"] == f"web-{NODE}"), None)

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await self.client.close()


async def _world(api: ApiServer, tmp_path: Path) -> World:
    node = await api.admin().create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    assert node["metadata"]["uid"]
    world = World(api, client_for(api, api.node_identity(NODE), tmp_path))
    await eventually(lambda: world.source.seen, what="the first list")
    return world


async def _wait_mirror(world: World, check: Any, what: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    async def poll() -> None:
        for _ in range(500):
            m = await world.mirror()
            if check(m):
                found.append(m or {})
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"timed out waiting for {what}")

    await poll()
    return found[0]


async def test_created_recreated_replaced_and_deleted_with_the_static_pod(
        api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    world = await _world(api_server, tmp_path)
    try:
        static = _static()
        world.statics = [StaticPod(static, terminating=False)]
        world.mirrors.wake()
        mirror = await _wait_mirror(world, lambda m: m is not None, "the mirror pod")
        node = await api_server.admin().get("nodes", NODE)
        md = mirror["metadata"]
        assert md["annotations"][MIRROR_ANNOTATION] == static["metadata"]["uid"]  # its config.hash
        assert md["annotations"]["kubernetes.io/config.source"] == "file"
        assert md["annotations"]["kubernetes.io/config.hash"] == static["metadata"]["uid"]
        assert "kubernetes.io/config.seen" in md["annotations"] and md["labels"] == {"app": "web"}
        assert md["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": NODE,
                                          "uid": node["metadata"]["uid"], "controller": True}]
        assert md["uid"] != static["metadata"]["uid"]  # the API server's own
        # deleted by someone: made again
        await api_server.admin().delete("pods", f"web-{NODE}", "kube-system", grace=0)
        again = await _wait_mirror(world, lambda m: m is not None and m["metadata"]["uid"] != md["uid"],
                                   "the mirror pod re-created")
        # a new version of the static pod (new hash): the old mirror is replaced
        newer = _static("busybox:1.36")
        world.statics = [StaticPod(newer, terminating=False)]
        world.mirrors.wake()
        await _wait_mirror(world, lambda m: m is not None
                           and m["metadata"]["annotations"][MIRROR_ANNOTATION] == newer["metadata"]["uid"],
                           "the mirror of the new version")
        assert again["metadata"]["annotations"][MIRROR_ANNOTATION] != newer["metadata"]["uid"]
        # the static pod stopping keeps its mirror; once it is gone, so is the mirror
        world.statics = [StaticPod(newer, terminating=True)]
        world.mirrors.wake()
        await asyncio.sleep(0.2)
        assert await world.mirror() is not None
        world.statics = []
        world.mirrors.wake()
        await _wait_mirror(world, lambda m: m is None, "the mirror deleted")
        deletes = [p for u, m, p in api_server.handler.requests if u == f"system:node:{NODE}" and m == "DELETE"]
        assert len(deletes) == 2  # the stale one, the orphan
    finally:
        await world.close()


async def test_the_static_pods_status_goes_to_its_mirror(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    world = await _world(api_server, tmp_path)
    try:
        static = _static()
        world.statics = [StaticPod(static, terminating=False)]
        world.mirrors.wake()
        mirror = await _wait_mirror(world, lambda m: m is not None, "the mirror pod")
        statuses = StatusManager()
        sync = PodStatusSync(world.client, FakeClock(), statuses, lambda _uid: False,
                             source_pod=lambda pod: world.mirrors.mirrors.get(podview.full_name(pod)))
        statuses.set_pod_status(static, {"phase": "Running", "hostIP": "192.0.2.2"})
        await sync.sync_pod(static["metadata"]["uid"])
        stored = await world.mirror()
        assert stored is not None and stored["metadata"]["uid"] == mirror["metadata"]["uid"]
        assert stored["status"]["phase"] == "Running" and stored["status"]["hostIP"] == "192.0.2.2"
        assert not sync.needs_update(static["metadata"]["uid"])
    finally:
        await world.close()


def test_the_sync_is_woken_by_a_changed_mirror_or_a_list_not_by_every_pod_event() -> None:
    # the API source hands the mirror pods over after each pod event, the same objects while untouched
    mirrors = MirrorPods(RestClient.__new__(RestClient), FakeClock(), NODE, lambda: [])
    woken: list[bool] = []

    def handed(pods: list[dict[str, Any]], listed: bool = False) -> None:
        mirrors._wake.clear()
        mirrors.set_mirror_pods(pods, listed)
        woken.append(mirrors._wake.is_set())

    first = {"metadata": {"name": "web-n1", "namespace": "kube-system", "annotations": {MIRROR_ANNOTATION: "h"}}}
    changed = {"metadata": {**first["metadata"], "resourceVersion": "2"}}
    handed([])  # an API pod's event, no mirror pods
    handed([], listed=True)  # a relist: the API server is back
    handed([first])
    handed([first])  # another pod's event
    handed([changed])
    handed([])
    assert woken == [False, True, True, False, True, True]

async def test_a_static_pod_without_a_mirror_pod_sends_no_status(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    # upstream syncBatch skips it ("Static pod does not have a corresponding mirror pod"); the agent asked the API
    # server for it every period (404, or 403 from the Node authorizer once a mirror was gone; found with the sim)
    world = await _world(api_server, tmp_path)
    try:
        static = _static()
        statuses = StatusManager()
        sync = PodStatusSync(world.client, FakeClock(), statuses, lambda _uid: False,
                             source_pod=lambda pod: world.mirrors.mirrors.get(podview.full_name(pod)))
        statuses.set_pod_status(static, {"phase": "Running", "hostIP": "192.0.2.2"})
        before = len(api_server.handler.requests)
        await sync.sync_pod(static["metadata"]["uid"])
        assert len(api_server.handler.requests) == before
        assert sync.needs_update(static["metadata"]["uid"])  # the periodic sync writes it once the mirror exists
    finally:
        await world.close()


async def test_of_several_static_pods_of_one_name_the_one_that_runs_has_the_mirror(
        api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    # upstream makes the mirror in the pod's sync: a pod refused at admission or waiting behind an older pod of its
    # name (no worker) gets none and takes none from the one that runs. Found with the sim (same-name file pods):
    # the agent made the mirror of the newest one, which waited, then of the running one, and so on.
    world = await _world(api_server, tmp_path)
    try:
        running, waiting = _static(), _static("busybox:1.36")
        world.statics = [StaticPod(running, terminating=False), StaticPod(waiting, terminating=False, started=False)]
        world.mirrors.wake()
        mirror = await _wait_mirror(world, lambda m: m is not None, "the mirror pod")
        assert mirror["metadata"]["annotations"][MIRROR_ANNOTATION] == running["metadata"]["uid"]
        world.statics = [StaticPod(waiting, terminating=False, started=False)]
        world.mirrors.wake()
        await asyncio.sleep(0.2)
        kept = await world.mirror()  # not started: its name's mirror is kept as it is, none made
        assert kept is not None and kept["metadata"]["uid"] == mirror["metadata"]["uid"]
    finally:
        await world.close()
