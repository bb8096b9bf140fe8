"""The pod sources as a node service: the manifest parser process is up before the first manifest needs it."""

from __future__ import annotations

from pathlib import Path

from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.metrics import Metrics
from minikubelet.services.pod_sources import PodSources
from minikubelet.sources.manifest_worker import ProcessParser


def _sources(static_pod_path: Path, published: list[list[Pod]]) -> PodSources:
    config = KubeletConfig(static_pod_path=str(static_pod_path))
    return PodSources(config, "n1", FakeClock(), Metrics(), lambda _s, pods: published.append(pods), lambda: None)


async def test_start_starts_the_parser_process_for_an_existing_static_pod_path(tmp_path: Path) -> None:
    published: list[list[Pod]] = []
    sources = _sources(tmp_path, published)
    parser = sources.static.parser
    assert isinstance(parser, ProcessParser)
    try:
        await sources.start()
        assert parser.pid is not None and parser.started == 1  # started with nothing to parse yet
        assert published == [[]]
        (tmp_path / "web.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n"
                                           "spec: {containers: [{name: c, image: busybox}]}\n")
        await sources.static.sync()
        assert [p["metadata"]["name"] for p in published[-1]] == ["web-n1"]
        assert parser.started == 1  # the manifest used the worker started ahead of it
    finally:
        await parser.close()


async def test_no_parser_process_without_a_static_pod_path_or_url(tmp_path: Path) -> None:
    published: list[list[Pod]] = []
    sources = _sources(tmp_path / "absent", published)
    parser = sources.static.parser
    assert isinstance(parser, ProcessParser)
    await sources.start()
    assert parser.pid is None and parser.started == 0
