"""Watch streams against watch-pods-node.raw, watch-list-initial-events.*, status-410-*."""

from __future__ import annotations

import asyncio
import re

from tests.apiserver import ApiServer
from tests.unit.apiserver.rawhttp import exchange, parse
from tests.unit.apiserver.replay import FIXTURES, load, send, shape
from tests.unit.apiserver.world import World


def _raw_request(recorded: str, api: ApiServer, **replace: str) -> str:
    request = str(load(recorded)["request"]["raw"]).replace("127.0.0.1:6443", f"{api.host}:{api.port}")
    for old, new in replace.items():
        request = request.replace(old, new)
    return request


async def test_pod_watch_bytes_as_recorded(api: ApiServer) -> None:
    recorded = parse((FIXTURES / "watch-pods-node.raw").read_bytes())
    world = World(api)
    node = await world.node("fx-node-1")
    listed = await node.list("pods", query="fieldSelector=spec.nodeName%3Dfx-node-1")
    rv = listed["metadata"]["resourceVersion"]
    request = _raw_request("watch-pods-node.json", api, **{"resourceVersion=282": f"resourceVersion={rv}",
                                                           "timeoutSeconds=20": "timeoutSeconds=3"})
    watching = asyncio.create_task(exchange(api.host, api.port, api.client_ssl(api.node_identity("fx-node-1")), request))
    await asyncio.sleep(0.2)
    pod = await world.simple_pod("watch-demo", "fx-node-1")
    await node.patch("pods", "watch-demo", {"status": {"phase": "Running"}}, "default", sub="status")
    await world.admin.delete("pods", "watch-demo", "default", grace=30)
    await node.request("DELETE", "/api/v1/namespaces/default/pods/watch-demo",
                       {"gracePeriodSeconds": 0, "preconditions": {"uid": pod["metadata"]["uid"]}})
    raw = await watching
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n") and raw.endswith(b"\r\n0\r\n\r\n")
    ours = parse(raw)

    assert ours.status_line == recorded.status_line == "HTTP/1.1 200 OK"
    for header in ("Content-Type", "Transfer-Encoding", "Cache-Control"):
        assert ours.headers[header] == recorded.headers[header], header
    # One event per chunk: compact JSON and a newline, then the terminating chunk.
    for chunks in (recorded.chunks, ours.chunks):
        assert chunks[-1] == b""
        assert all(c.endswith(b"}\n") and c.count(b"\n") == 1 and b'": ' not in c for c in chunks[:-1])
    recorded_types = [e["type"] for e in recorded.events()]
    assert [e["type"] for e in ours.events()] == recorded_types[:6]  # the recording read two late bookmarks
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in ours.events()]
    assert rvs[:5] == sorted(rvs[:5]) and rvs[5] == rvs[4]
    bookmark = ours.events()[5]["object"]
    assert shape(bookmark) == shape(recorded.events()[5]["object"])
    modified_by_final_delete = ours.events()[3]["object"]["metadata"]
    assert modified_by_final_delete["deletionGracePeriodSeconds"] == 0


async def test_too_old_watch_is_an_error_event_then_eof(api: ApiServer) -> None:
    recorded = parse((FIXTURES / "status-410-watch-too-old.raw").read_bytes())
    world = World(api)
    await world.node("fx-node-1")
    api.store.compact()
    request = _raw_request("status-410-watch-too-old.json", api)
    ours = parse(await exchange(api.host, api.port, api.client_ssl(api.node_identity("fx-node-1")), request))
    assert ours.status_line == recorded.status_line
    assert len(ours.chunks) == len(recorded.chunks) == 2
    (event,) = ours.events()
    (want,) = recorded.events()
    message = r"too old resource version: 1 \(\d+\)"
    assert re.fullmatch(message, event["object"]["message"]) and re.fullmatch(message, want["object"]["message"])
    event["object"]["message"] = want["object"]["message"]
    assert event == want


async def test_too_old_exact_list_is_410(api: ApiServer) -> None:
    for i in range(3):
        await api.admin().create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
    api.store.compact()
    fx = load("status-410-list-too-old.json")
    reply = await send(api.admin(), fx["request"])
    assert (reply.status, reply.body) == (410, fx["response"]["body"])


async def test_history_window_is_bounded(api: ApiServer) -> None:
    first = api.store.rv
    for i in range(api.store.history_size + 1):
        await api.admin().create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
    events = [e async for e in api.admin().watch(f"/api/v1/configmaps?watch=1&resourceVersion={first}&timeoutSeconds=2")]
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410


async def test_streaming_list_ends_initial_events_with_a_bookmark(api: ApiServer) -> None:
    recorded = load("watch-list-initial-events.json")["response"]
    world = World(api)
    await world.node("fx-node-1")
    await world.simple_pod("wl-demo-1", "fx-node-1")
    await world.simple_pod("wl-demo-2", "fx-node-1")
    await world.node("fx-node-2")
    await world.simple_pod("elsewhere", "fx-node-2")
    request = _raw_request("watch-list-initial-events.json", api, **{"timeoutSeconds=5": "timeoutSeconds=1"})
    ours = parse(await exchange(api.host, api.port, api.client_ssl(api.node_identity("fx-node-1")), request))
    types = [e["type"] for e in ours.events()]
    assert types == ["ADDED", "ADDED", "BOOKMARK"]
    assert [e["type"] for e in recorded["events"]][-1] == "BOOKMARK"
    end = ours.events()[-1]["object"]
    assert shape(end) == shape(recorded["events"][-1]["object"])
    assert end["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert [e["object"]["metadata"]["name"] for e in ours.events()[:2]] == ["wl-demo-1", "wl-demo-2"]


async def test_single_secret_watch_of_a_referenced_secret(api: ApiServer) -> None:
    world = World(api)
    await world.rich_pod()
    node = world.nodes["fx-node-1"]
    path = ("/api/v1/namespaces/default/secrets?allowWatchBookmarks=true&fieldSelector=metadata.name%3Drich-secret"
            "&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=2&watch=true")

    async def change() -> None:
        await asyncio.sleep(0.3)
        await world.admin.patch("secrets", "rich-secret", {"data": {"username": "cm9vdA=="}}, "default")

    changer = asyncio.create_task(change())
    events = [e async for e in node.watch(path)]
    await changer
    assert [e["type"] for e in events][:3] == ["ADDED", "BOOKMARK", "MODIFIED"]
    assert events[2]["object"]["data"]["username"] == "cm9vdA=="
    other = await node.request("GET", path.replace("rich-secret", "not-referenced"))
    assert other.status == 403


async def test_label_selector_watch_sees_objects_enter_and_leave(api: ApiServer) -> None:
    admin = api.admin()
    await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"app": "a"}}})
    rv = api.store.rv

    async def change() -> None:
        await asyncio.sleep(0.2)
        await admin.patch("configmaps", "c", {"metadata": {"labels": {"app": "b"}}}, "default")
        await admin.patch("configmaps", "c", {"metadata": {"labels": {"app": "a"}}}, "default")
        await admin.patch("configmaps", "c", {"data": {"k": "v"}}, "default")

    changer = asyncio.create_task(change())
    path = f"/api/v1/namespaces/default/configmaps?watch=1&labelSelector=app%3Da&resourceVersion={rv}&timeoutSeconds=1"
    events = [e["type"] async for e in admin.watch(path)]
    await changer
    assert events == ["DELETED", "ADDED", "MODIFIED"]
