"""/pods is rendered again only when the pods changed."""

from __future__ import annotations

import json
from typing import Any

from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.server.app import KubeletServer
from minikubelet.server.pods_cache import RenderedPods
from tests.unit.server.plain_client import plain_client


class Pods:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = [{"metadata": {"name": "a"}, "status": {"phase": "Running"}}]
        self.version = 1
        self.calls = 0

    def list(self) -> list[dict[str, Any]]:
        self.calls += 1
        return [dict(p) for p in self.items]

    def change(self, phase: str) -> None:
        self.items = [{"metadata": {"name": "a"}, "status": {"phase": phase}}]
        self.version += 1


def test_with_a_version_the_pods_are_listed_and_rendered_once_per_version() -> None:
    pods = Pods()
    cache = RenderedPods(pods.list, lambda: pods.version)
    first, tag1 = cache.body()
    again, tag2 = cache.body()
    assert again is first and tag2 == tag1 and pods.calls == 1 and cache.renders == 1
    assert json.loads(first) == {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods.items}

    pods.change("Succeeded")
    body, tag3 = cache.body()
    assert tag3 != tag1 and cache.renders == 2
    assert json.loads(body)["items"][0]["status"]["phase"] == "Succeeded"


def test_without_a_version_a_digest_decides() -> None:
    pods = Pods()
    cache = RenderedPods(pods.list)
    first, tag1 = cache.body()
    again, tag2 = cache.body()
    assert again is first and tag2 == tag1 and cache.renders == 1 and pods.calls == 2

    pods.change("Failed")
    body, tag3 = cache.body()
    assert tag3 != tag1 and cache.renders == 2
    assert json.loads(body)["items"][0]["status"]["phase"] == "Failed"


def test_etags_differ_between_two_agent_lifetimes_at_the_same_version() -> None:
    pods = Pods()
    assert RenderedPods(pods.list, lambda: 1).body()[1] != RenderedPods(pods.list, lambda: 1).body()[1]


async def test_pods_endpoint_serves_the_cached_body_with_an_etag() -> None:
    pods = Pods()

    async def health() -> list[tuple[str, str | None]]:
        return [("ping", None)]

    server = KubeletServer(pods.list, health, CollectorRegistry(), lambda uid: [], None,
                           pods_version=lambda: pods.version)
    async with plain_client(server.routes()) as client:
        r = await client.get("/pods")
        assert r.status == 200 and r.content_type == "application/json"
        assert (await r.json())["items"] == pods.items
        etag = r.headers["ETag"]
        r = await client.get("/pods", headers={"If-None-Match": etag})
        assert r.status == 304 and r.headers["ETag"] == etag
        pods.change("Succeeded")
        r = await client.get("/pods", headers={"If-None-Match": etag})
        assert r.status == 200 and (await r.json())["items"][0]["status"]["phase"] == "Succeeded"
        assert pods.calls == 2


def test_an_item_that_is_the_same_object_is_not_serialised_again() -> None:
    a: dict[str, Any] = {"metadata": {"name": "a"}, "status": {"phase": "Running"}}
    b: dict[str, Any] = {"metadata": {"name": "b"}, "status": {"phase": "Pending"}}
    items = [a, b]
    version = 1
    cache = RenderedPods(lambda: items, lambda: version)
    body, _ = cache.body()
    assert cache.item_renders == 2
    b2: dict[str, Any] = {"metadata": {"name": "b"}, "status": {"phase": "Running", "podIP": "10.0.0.2"}}
    items, version = [a, b2], 2
    body, _ = cache.body()
    assert cache.item_renders == 3  # only b's new version
    expected = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [a, b2]},
                          separators=(",", ":")).encode()
    assert body == expected
    items, version = [b2], 3  # a gone: the body follows, nothing rendered
    body, _ = cache.body()
    assert cache.item_renders == 3 and json.loads(body)["items"] == [b2]
