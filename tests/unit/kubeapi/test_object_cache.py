"""The watch-based ConfigMap/Secret cache against the test API server (Node authorizer included): one
single-object watch per referenced name, released with the last reference; changes reported; not-found
objects that appear; immutable objects no longer watched; a cache that cannot list times out on the clock."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from minikubelet.base.clock import FakeClock, RealClock
from minikubelet.kubeapi.object_cache import CacheError, ObjectCache
from tests.apiserver import ApiServer
from tests.apiserver.fixtures import api_server  # noqa: F401
from tests.unit.kubeapi.helpers import client_for, drive, eventually


def cm(name: str, immutable: bool = False, **data: str) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
                           "data": data}
    if immutable:
        obj["immutable"] = True
    return obj


def pod(name: str, *configmaps: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "n1", "automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": "busybox",
                                     "envFrom": [{"configMapRef": {"name": c}} for c in configmaps]}]}}


def watches_of(api: ApiServer, name: str) -> list[str]:
    return [p for _, m, p in api.handler.requests if m == "GET" and "watch=true" in p
            and f"fieldSelector=metadata.name%3D{name}" in p]


async def test_one_watch_per_name_released_with_the_last_reference(api_server: ApiServer,  # noqa: F811
                                                                   tmp_path: Path) -> None:
    admin = api_server.admin()
    await admin.create(cm("shared", k="v1"))
    await admin.create(pod("p1", "shared"))
    await admin.create(pod("p2", "shared"))
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    changes: list[tuple[str, str]] = []
    cache = ObjectCache(client, "configmaps", "configmap", RealClock(),
                        on_change=lambda ns, n: changes.append((ns, n)))
    try:
        cache.add_reference("default", "shared", "uid-1")
        cache.add_reference("default", "shared", "uid-2")
        cache.add_reference("default", "shared", "uid-2")
        assert (await cache.get("default", "shared"))["data"] == {"k": "v1"}
        assert cache.referenced_by("default", "shared") == ["uid-1", "uid-2"]
        await eventually(lambda: len(watches_of(api_server, "shared")) == 1, what="one watch")
        lists = [p for _, m, p in api_server.handler.requests if m == "GET"
                 and p.startswith("/api/v1/namespaces/default/configmaps?") and "watch=true" not in p]
        assert lists == ["/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dshared"]

        await admin.patch("configmaps", "shared", {"data": {"k": "v2"}}, "default")
        await eventually(lambda: changes == [("default", "shared")], what="the change")
        assert (await cache.get("default", "shared"))["data"] == {"k": "v2"}

        cache.delete_reference("default", "shared", "uid-1")
        cache.delete_reference("default", "shared", "uid-2")
        assert cache.watched() == {("default", "shared"): True}  # uid-2 held two references
        cache.delete_reference("default", "shared", "uid-2")
        assert cache.watched() == {}
        await eventually(lambda: not api_server.watches.open, what="the watch to close")
        with pytest.raises(CacheError, match='object "default"/"shared" not registered'):
            await cache.get("default", "shared")
    finally:
        cache.close()
        await client.close()


async def test_a_missing_object_is_not_found_until_it_is_created(api_server: ApiServer,  # noqa: F811
                                                                 tmp_path: Path) -> None:
    admin = api_server.admin()
    await admin.create(pod("p1", "later"))
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    changes: list[str] = []
    cache = ObjectCache(client, "configmaps", "configmap", RealClock(), on_change=lambda _ns, n: changes.append(n))
    try:
        cache.add_reference("default", "later", "uid-1")
        with pytest.raises(CacheError, match=r'^configmap "later" not found$') as e:
            await cache.get("default", "later")
        assert e.value.not_found
        await eventually(lambda: bool(watches_of(api_server, "later")), what="the watch")
        await admin.create(cm("later", k="here"))
        await eventually(lambda: changes == ["later"], what="ADDED")
        assert (await cache.get("default", "later"))["data"] == {"k": "here"}
        await admin.delete("configmaps", "later", "default")
        await eventually(lambda: changes == ["later", "later"], what="DELETED")
        with pytest.raises(CacheError, match="not found"):
            await cache.get("default", "later")
    finally:
        cache.close()
        await client.close()


async def test_an_immutable_object_is_not_watched_after_the_first_read(api_server: ApiServer,  # noqa: F811
                                                                      tmp_path: Path) -> None:
    admin = api_server.admin()
    await admin.create(cm("frozen", immutable=True, k="v"))
    await admin.create(pod("p1", "frozen"))
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    cache = ObjectCache(client, "configmaps", "configmap", RealClock())
    try:
        cache.add_reference("default", "frozen", "uid-1")
        assert (await cache.get("default", "frozen"))["data"] == {"k": "v"}
        assert cache.watched() == {("default", "frozen"): False}
        await eventually(lambda: not api_server.watches.open, what="no watch")
        assert (await cache.get("default", "frozen"))["data"] == {"k": "v"}  # still served from the cache
    finally:
        cache.close()
        await client.close()


async def test_an_object_the_node_may_not_read_times_out_on_the_clock(api_server: ApiServer,  # noqa: F811
                                                                      tmp_path: Path) -> None:
    admin = api_server.admin()
    await admin.create(cm("unreferenced", k="v"))  # no pod bound to n1 references it: the list is a 403
    clock = FakeClock()
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    changes: list[str] = []
    cache = ObjectCache(client, "configmaps", "configmap", clock, on_change=lambda _ns, n: changes.append(n))
    try:
        cache.add_reference("default", "unreferenced", "uid-1")
        get = asyncio.create_task(cache.get("default", "unreferenced"))
        await eventually(lambda: any(p.startswith("/api/v1/namespaces/default/configmaps?")
                                     for _, m, p in api_server.handler.requests if m == "GET"), what="the list")
        await asyncio.sleep(0.05)
        assert not get.done()  # the timeout is the injected clock's
        clock.advance(1.0)
        with pytest.raises(CacheError, match=r"^failed to sync configmap cache: timed out waiting for the condition$"):
            await get
        # once a pod bound to the node references it, the list retried after its backoff succeeds, and the
        # pods that gave up waiting are told
        await admin.create(pod("p1", "unreferenced"))
        await drive(clock, eventually(lambda: changes == ["unreferenced"], what="the first list"))
        assert (await cache.get("default", "unreferenced"))["data"] == {"k": "v"}
    finally:
        cache.close()
        await client.close()
