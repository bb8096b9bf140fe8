from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from minikubelet.base.clock import RealClock
from minikubelet.kubeapi.rest import TransportError
from minikubelet.kubeapi.watch import LIST, ListWatch, WatchEvent
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import client_for, eventually


def _node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


async def _collect(watch: ListWatch, into: list[WatchEvent]) -> None:
    async for event in watch.events():
        into.append(event)


async def test_list_then_watch_resumes_after_a_dropped_stream(api_server: ApiServer, tmp_path: Path) -> None:
    admin = api_server.admin()
    await admin.create(_node("a"))
    client = client_for(api_server, api_server.admin_identity(), tmp_path)
    watch = ListWatch(client, "/api/v1/nodes", RealClock())
    events: list[WatchEvent] = []
    task = asyncio.create_task(_collect(watch, events))
    try:
        await eventually(lambda: len(events) == 1, what="the list")
        assert events[0].type == LIST and [i["metadata"]["name"] for i in events[0].items] == ["a"]
        await eventually(lambda: bool(api_server.watches.open), what="the watch")
        await admin.create(_node("b"))
        await eventually(lambda: len(events) == 2, what="ADDED b")
        assert (events[1].type, events[1].object["metadata"]["name"]) == ("ADDED", "b")
        seen_rv = watch.resource_version
        assert api_server.watches.drop() == 1
        await admin.delete("nodes", "a")
        await eventually(lambda: len(events) == 3, timeout=10, what="DELETED a after the reconnect")
        assert (events[2].type, events[2].object["metadata"]["name"]) == ("DELETED", "a")
        watches = [p for _, m, p in api_server.handler.requests if "watch=true" in p]
        assert len(watches) == 2 and f"resourceVersion={seen_rv}" in watches[1]
        assert all("allowWatchBookmarks=true" in p for p in watches)
    finally:
        task.cancel()
        await client.close()


async def test_410_relists(api_server: ApiServer, tmp_path: Path) -> None:
    admin = api_server.admin()
    client = client_for(api_server, api_server.admin_identity(), tmp_path)
    watch = ListWatch(client, "/api/v1/nodes", RealClock(), field_selector="metadata.name=x")
    events: list[WatchEvent] = []
    task = asyncio.create_task(_collect(watch, events))
    try:
        await eventually(lambda: bool(api_server.watches.open), what="the watch")
        await admin.create(_node("other"))
        api_server.store.compact()
        api_server.watches.drop()
        await admin.create(_node("x"))
        await eventually(lambda: sum(e.type == LIST for e in events) == 2, timeout=10, what="a relist")
        relist = [e for e in events if e.type == LIST][1]
        assert [i["metadata"]["name"] for i in relist.items] == ["x"]
    finally:
        task.cancel()
        await client.close()


async def test_a_watch_line_is_bounded(api_server: ApiServer, tmp_path: Path) -> None:
    admin = api_server.admin()
    await admin.create({**_node("big"), "metadata": {"name": "big", "labels": {"k": "v" * 60}}})
    client = client_for(api_server, api_server.admin_identity(), tmp_path, max_line=100)
    try:
        with pytest.raises(TransportError, match="longer than 100 bytes"):
            async with client.stream_lines("/api/v1/nodes", {"watch": "true", "resourceVersion": "0",
                                                             "sendInitialEvents": "true",
                                                             "resourceVersionMatch": "NotOlderThan"}, 5) as lines:
                async for _ in lines:
                    pass
    finally:
        await client.close()
