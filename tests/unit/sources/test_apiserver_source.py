"""The API server pod source against the test API server: the node's pods as one SET, updates and
deletions, bookmarks, a relist after 410, and a graceful delete reaching the pod manager as a kill."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from minikubelet.base.clock import RealClock
from minikubelet.base.podview import Pod
from minikubelet.kubeapi.watch import LIST, WatchEvent
from minikubelet.sources.apiserver import API_SOURCE, ApiserverPodSource
from tests.apiserver import ApiServer
from tests.apiserver.fixtures import api_server  # noqa: F401
from tests.unit.kubeapi.helpers import client_for, eventually


def _pod(name: str, node: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": "busybox"}], **spec}}


class Sets:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Pod]]] = []

    def __call__(self, source: str, pods: list[Pod]) -> None:
        self.calls.append((source, pods))

    def names(self) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.calls[-1][1]) if self.calls else []

    def last(self, name: str) -> Pod:
        return next(p for p in self.calls[-1][1] if p["metadata"]["name"] == name)


async def test_lists_and_watches_only_its_nodes_pods(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    admin = api_server.admin()
    await admin.create(_pod("mine", "n1"))
    await admin.create(_pod("other", "n2"))
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    sets = Sets()
    source = ApiserverPodSource(client, "n1", RealClock(), sets)
    task = asyncio.create_task(source.run())
    try:
        await eventually(lambda: sets.names() == ["mine"], what="the first list")
        assert source.seen and sets.calls[0][0] == API_SOURCE
        pod = sets.last("mine")
        # our copy says where it came from; managedFields are left out
        assert pod["metadata"]["annotations"]["kubernetes.io/config.source"] == "api"
        assert "managedFields" not in pod["metadata"] and pod["status"]["phase"] == "Pending"
        lists = [p for _, m, p in api_server.handler.requests if m == "GET" and p.startswith("/api/v1/pods")]
        assert "fieldSelector=spec.nodeName%3Dn1" in lists[0]
        await eventually(lambda: bool(api_server.watches.open), what="the watch")
        assert "allowWatchBookmarks=true" in next(p for _, m, p in api_server.handler.requests if "watch=true" in p)
        await admin.create(_pod("second", "n1"))
        await eventually(lambda: sets.names() == ["mine", "second"], what="ADDED")
        await admin.delete("pods", "second", "default", grace=0)
        await eventually(lambda: sets.names() == ["mine"], what="DELETED")
        # a graceful delete keeps the pod, with its deletion fields, for the pod manager to kill
        await admin.delete("pods", "mine", "default", grace=7)
        await eventually(lambda: "deletionTimestamp" in sets.last("mine")["metadata"], what="the deletion")
        assert sets.last("mine")["metadata"]["deletionGracePeriodSeconds"] == 7
        seen = sets.last("mine")["metadata"]["annotations"]["kubernetes.io/config.seen"]
        assert seen == sets.calls[0][1][0]["metadata"]["annotations"]["kubernetes.io/config.seen"]
    finally:
        task.cancel()
        await client.close()


async def test_conditions_others_write_reach_the_pod(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    admin = api_server.admin()
    await admin.create(_pod("p", "n1", readinessGates=[{"conditionType": "example.com/gate"}]))
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    sets = Sets()
    source = ApiserverPodSource(client, "n1", RealClock(), sets)
    task = asyncio.create_task(source.run())
    try:
        await eventually(lambda: bool(api_server.watches.open) and sets.names() == ["p"], what="the watch")
        gate = {"type": "example.com/gate", "status": "True"}
        await admin.patch("pods", "p", {"status": {"conditions": [gate]}}, "default", sub="status")
        # the status generator reads readiness gates from the pod's API status (upstream HandlePodReconcile)
        await eventually(lambda: any(c.get("type") == "example.com/gate" and c.get("status") == "True"
                                     for c in (sets.last("p").get("status") or {}).get("conditions", [])),
                         what="the gate's condition in the handed-over pod")
    finally:
        task.cancel()
        await client.close()


async def test_relists_after_410_and_resumes_after_a_drop(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    admin = api_server.admin()
    await admin.create(_pod("a", "n1"))
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    sets = Sets()
    source = ApiserverPodSource(client, "n1", RealClock(), sets)
    task = asyncio.create_task(source.run())
    try:
        await eventually(lambda: bool(api_server.watches.open) and sets.names() == ["a"], what="the watch")
        rv = source.watch.resource_version
        assert api_server.watches.drop() == 1
        await admin.create(_pod("b", "n1"))
        await eventually(lambda: sets.names() == ["a", "b"], what="the pod created while resuming")
        watches = [p for _, m, p in api_server.handler.requests if "watch=true" in p]
        assert f"resourceVersion={rv}" in watches[1]  # resumed, not relisted
        lists_before = sum(1 for _, m, p in api_server.handler.requests if m == "GET" and "watch=true" not in p)
        await admin.create(_pod("elsewhere", "n2"))  # moves the store on, unseen by this node's watch
        api_server.store.compact()  # the version the watch would resume from is gone: 410
        assert api_server.watches.drop() >= 1
        calls = len(sets.calls)
        await eventually(lambda: sum(1 for _, m, p in api_server.handler.requests
                                     if m == "GET" and "watch=true" not in p) > lists_before, what="the relist")
        await eventually(lambda: len(sets.calls) > calls, what="the relisted set")
        assert sets.names() == ["a", "b"]
        await admin.delete("pods", "a", "default", grace=0)
        await eventually(lambda: sets.names() == ["b"], what="watching again after the relist")
    finally:
        task.cancel()
        await client.close()


def test_foreign_and_malformed_objects_are_dropped_and_the_set_is_bounded() -> None:
    sets = Sets()
    source = ApiserverPodSource(None, "n1", RealClock(), sets, max_pods=2)  # type: ignore[arg-type]  # never talks
    items = [_pod(f"p{i}", "n1") for i in range(3)] + [_pod("x", "n2"), {"metadata": "bad"}]
    for i, item in enumerate(items[:4]):
        item["metadata"]["uid"] = f"u{i}"
    source.apply(WatchEvent(LIST, items=tuple(items)))
    assert sets.names() == ["p0", "p1"]


def test_an_event_rebuilds_only_the_copy_of_the_pod_it_names() -> None:
    sets = Sets()
    source = ApiserverPodSource(None, "n1", RealClock(), sets)  # type: ignore[arg-type]  # never talks
    items = [_pod(f"p{i}", "n1") for i in range(2)]
    for i, item in enumerate(items):
        item["metadata"]["uid"] = f"u{i}"
    source.apply(WatchEvent(LIST, items=tuple(items)))
    p0, p1 = sets.last("p0"), sets.last("p1")
    changed = {**items[1], "metadata": {**items[1]["metadata"], "labels": {"a": "b"}}}
    source.apply(WatchEvent("MODIFIED", object=changed))
    assert sets.last("p0") is p0  # the same copy: the merge sees the same pod
    assert sets.last("p1") is not p1 and sets.last("p1")["metadata"]["labels"] == {"a": "b"}
    assert sets.last("p1")["metadata"]["annotations"] == p1["metadata"]["annotations"]  # config.seen kept
    source.apply(WatchEvent(LIST, items=tuple(items)))  # a relist: the same objects, their copies again
    assert sets.last("p0") is p0 and sets.last("p1")["metadata"].get("labels") is None
