"""The stats routes on the real h11 listener: /stats/summary (GET, POST, only_cpu_and_memory), /stats/* paths 1.36
does not serve, /metrics/resource and /metrics/cadvisor (content type and gzip as recorded), cached renderings."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from cri.fake import FakeRuntime
from minikubelet.base.clock import FakeClock
from minikubelet.server.routes import Routes
from minikubelet.server.stats import StatsHandlers
from minikubelet.stats.interfaces import InterfaceSample
from minikubelet.stats.provider import StatsProvider
from tests.unit.server.plain_client import plain_client
from tests.unit.stats.factories import snapshot


def no_interfaces(_netns: str | None) -> list[InterfaceSample]:
    return []


def provider(tmp_path: Path) -> StatsProvider:
    return StatsProvider(FakeRuntime(FakeClock()), FakeClock(), "node-a", str(tmp_path), None,
                         interfaces=no_interfaces)


def app(handlers: StatsHandlers) -> Routes:
    return handlers.routes()


async def test_summary_get_post_and_only_cpu_and_memory(tmp_path: Path) -> None:
    p = provider(tmp_path)
    p.snapshot = snapshot()
    async with plain_client(app(StatsHandlers(p))) as client:
        r = await client.get("/stats/summary")
        assert r.status == 200 and r.headers["Content-Type"] == "application/json"
        full = json.loads(await r.read())
        assert "network" in full["pods"][0]
        for req in (client.get("/stats/summary?only_cpu_and_memory=true"),
                    client.post("/stats/summary", data={"only_cpu_and_memory": "true"})):
            small = json.loads(await (await req).read())
            assert "network" not in small["pods"][0] and "cpu" in small["pods"][0]
        # Upstream takes the query only when it is exactly one "true".
        for query in ("?only_cpu_and_memory=1", "?only_cpu_and_memory=true&only_cpu_and_memory=true"):
            body = json.loads(await (await client.get("/stats/summary" + query)).read())
            assert "network" in body["pods"][0]


async def test_paths_136_does_not_serve(tmp_path: Path) -> None:
    p = provider(tmp_path)
    p.snapshot = snapshot()
    async with plain_client(app(StatsHandlers(p))) as client:
        for path in ("/stats/container", "/stats/default/web/uid/c", "/stats/"):
            r = await client.get(path)
            assert (r.status, await r.text()) == (404, "404: Page Not Found"), path


async def test_metrics_content_type_and_gzip(tmp_path: Path) -> None:
    p = provider(tmp_path)
    p.snapshot = snapshot()
    async with plain_client(app(StatsHandlers(p))) as client:
        for path in ("/metrics/resource", "/metrics/cadvisor"):
            r = await client.get(path, headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
            assert r.status == 200
            assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
            assert r.headers["Content-Encoding"] == "gzip"
            text = gzip.decompress(await r.read()).decode()
            assert text.startswith("# HELP ")
            plain = await client.get(path, headers={"Accept-Encoding": "identity"})
            assert "Content-Encoding" not in plain.headers and await plain.text() == text


async def test_a_rendering_lasts_until_the_next_snapshot(tmp_path: Path) -> None:
    p = provider(tmp_path)
    p.snapshot = snapshot()
    handlers = StatsHandlers(p)
    async with plain_client(app(handlers)) as client:
        await client.get("/metrics/resource", headers={"Accept-Encoding": "gzip"})
        first = handlers._rendered["resource+gzip"][1]
        await client.get("/metrics/resource", headers={"Accept-Encoding": "gzip"})
        assert handlers._rendered["resource+gzip"][1] is first
        p.snapshot = snapshot(rate=None)
        await client.get("/metrics/resource", headers={"Accept-Encoding": "gzip"})
        assert handlers._rendered["resource+gzip"][1] is not first


async def test_first_scrape_before_housekeeping_takes_a_sample(tmp_path: Path) -> None:
    p = provider(tmp_path)
    async with plain_client(app(StatsHandlers(p))) as client:
        body = json.loads(await (await client.get("/stats/summary")).read())
    assert p.passes == 1
    assert body["node"]["nodeName"] == "node-a" and body["pods"] == []
