"""The node's own Node for admission: list + watch by `metadata.name`, against the test API server."""

from __future__ import annotations

import asyncio
from fractions import Fraction
from pathlib import Path

from minikubelet.base.clock import RealClock
from minikubelet.base.podview import PodView
from minikubelet.kubeapi.watch import LIST, WatchEvent
from minikubelet.node.labels import Taint
from minikubelet.node.lister import NodeLister, node_from_api
from minikubelet.pod.predicate import general_filter
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import client_for, eventually


def test_node_from_api_reads_labels_taints_and_allocatable() -> None:
    node = node_from_api({
        "metadata": {"name": "n1", "labels": {"a": "1", "kubernetes.io/os": "linux"}},
        "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}, {"key": "bare", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "1500m", "memory": "1Gi", "pods": "110", "example.com/widget": "2"}},
    })
    assert node is not None and node.name == "n1"
    assert node.labels == {"a": "1", "kubernetes.io/os": "linux"}
    assert node.taints == (Taint("k", "v", "NoExecute"), Taint("bare", "", "NoSchedule"))
    assert node.allocatable == {"cpu": Fraction(3, 2), "memory": Fraction(2**30), "pods": Fraction(110),
                                "example.com/widget": Fraction(2)}


def test_node_from_api_skips_what_has_the_wrong_shape() -> None:
    node = node_from_api({
        "metadata": {"name": "n1", "labels": {"ok": "1", "num": 3, "none": None}},
        "spec": {"taints": [{"key": "k", "effect": 5, "value": ["x"]}, "junk", {"effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "lots", "memory": "1Gi", "pods": True}},
    })
    assert node is not None
    assert node.labels == {"ok": "1"}
    assert node.taints == (Taint("k", "", ""),)
    assert node.allocatable == {"memory": Fraction(2**30)}
    assert node_from_api({"metadata": {"labels": {}}}) is None
    assert node_from_api({"metadata": "n1"}) is None
    assert node_from_api({}) is None


def test_a_deleted_node_keeps_the_last_one_and_others_are_ignored(tmp_path: Path) -> None:
    lister = NodeLister(None, "n1", RealClock())  # type: ignore[arg-type]  # apply() never uses the client
    assert lister.get() is None and not lister.synced.is_set()
    lister.apply(WatchEvent(LIST, items=()))
    assert lister.synced.is_set() and lister.get() is None  # synced, nothing yet: the caller's local node
    lister.apply(WatchEvent("ADDED", {"metadata": {"name": "n1", "labels": {"a": "1"}}}))
    lister.apply(WatchEvent("MODIFIED", {"metadata": {"name": "n2", "labels": {"a": "2"}}}))
    assert lister.get() is not None and dict(lister.get().labels) == {"a": "1"}  # type: ignore[union-attr]
    lister.apply(WatchEvent("DELETED", {"metadata": {"name": "n1"}}))
    assert lister.get() is not None and dict(lister.get().labels) == {"a": "1"}  # type: ignore[union-attr]


async def test_labels_and_taints_changed_in_the_api_reach_admission(api_server: ApiServer, tmp_path: Path) -> None:
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                          "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
                                          "status": {"capacity": {"cpu": "2", "pods": "110"},
                                                     "allocatable": {"cpu": "2", "pods": "110"}}})
    lister = NodeLister(client, "n1", RealClock())
    task = asyncio.create_task(lister.run())
    try:
        await asyncio.wait_for(lister.synced.wait(), 5)
        node = lister.get()
        # the API server's TaintNodesByCondition admission adds not-ready/NoSchedule, which the kubelet ignores
        assert node is not None and node.labels == {"kubernetes.io/hostname": "n1"}
        assert node.taints == (Taint("node.kubernetes.io/not-ready", "", "NoSchedule"),)
        pod = PodView.of({"metadata": {"name": "p", "namespace": "default", "uid": "u"},
                          "spec": {"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "c", "image": "i"}]}})
        assert [f.message for f in general_filter(pod, [], node)] == [
            "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"]
        admin = api_server.admin()
        # kubectl label node n1 disk=ssd; kubectl taint node n1 drain=now:NoExecute
        await admin.patch("nodes", "n1", {"metadata": {"labels": {"disk": "ssd"}},
                                          "spec": {"taints": [{"key": "drain", "value": "now", "effect": "NoExecute"}]}})
        await eventually(lambda: (n := lister.get()) is not None and n.labels.get("disk") == "ssd", what="the label")
        node = lister.get()
        assert node is not None and node.taints == (Taint("drain", "now", "NoExecute"),)
        assert [f.message for f in general_filter(pod, [], node)] == [
            "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"]
        # the Node authorizer's rule: only its own Node, by name, is listed and watched
        node_calls = [(m, p) for u, m, p in api_server.handler.requests
                      if u == "system:node:n1" and p.startswith("/api/v1/nodes") and m == "GET"]
        assert len(node_calls) >= 2
        assert all(p.startswith("/api/v1/nodes?fieldSelector=metadata.name%3Dn1") for _m, p in node_calls)
        assert "watch=true" in node_calls[1][1] and "allowWatchBookmarks=true" in node_calls[1][1]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def test_refresh_reads_the_node_now_and_an_older_version_never_wins(api_server: ApiServer, tmp_path: Path) -> None:
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    try:
        created = await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                        "metadata": {"name": "n1", "labels": {"a": "1"}}})
        lister = NodeLister(client, "n1", RealClock())  # not watching: only the read brings the Node
        await api_server.admin().patch("nodes", "n1", {"metadata": {"labels": {"disk": "ssd"}}})
        await lister.refresh()
        node = lister.get()
        assert node is not None and node.labels == {"a": "1", "disk": "ssd"}
        lister.apply(WatchEvent("MODIFIED", created))  # the creation, arriving late
        assert lister.get() is node
    finally:
        await client.close()


async def test_the_status_update_reads_the_cache_only_while_the_watch_is_established(api_server: ApiServer,
                                                                                      tmp_path: Path) -> None:
    """After an outage the watch waits out its backoff while the node lifecycle controller has marked the Node
    Unknown: `current_object` is then None, so the status update GETs the Node rather than compare with its own
    stale copy; `object` (admission's) keeps the last Node."""
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    lister = NodeLister(client, "n1", RealClock())
    task = asyncio.create_task(lister.run())
    try:
        await eventually(lambda: lister.current_object() is not None, what="the watch established")
        await api_server.stop()
        await eventually(lambda: lister.current_object() is None, what="the watch lost")
        assert lister.object() is not None
        await api_server.start()
        await eventually(lambda: lister.current_object() is not None, what="the watch back", timeout=15)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()
