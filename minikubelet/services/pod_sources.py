"""The local pod sources as a node service: the static pod directory and the manifest URL, each read once at
start-up (after the runtime's first relist) and then watched."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.metrics import Metrics
from minikubelet.services.service import Loop, Service
from minikubelet.sources.file import StaticPodSource
from minikubelet.sources.manifest_worker import ProcessParser as ProcessParser  # re-exported: the agent takes one
from minikubelet.sources.manifest_worker import parser_wanted

if TYPE_CHECKING:
    from minikubelet.sources.url import URLPodSource


class PodSources(Service):
    name = "pod-sources"

    def __init__(self, config: KubeletConfig, node_name: str, clock: Clock, metrics: Metrics,
                 set_source_pods: Callable[[str, list[Pod]], None], after_first_sync: Callable[[], None],
                 parser: ProcessParser | None = None) -> None:
        """`parser`: one already started (the agent's start-up starts it first), else a new one."""
        parser = parser or ProcessParser()  # one parser process for both sources
        self.static = StaticPodSource(config.static_pod_path, node_name, clock, metrics, set_source_pods,
                                      check_frequency=config.file_check_frequency, parser=parser)
        self.url: URLPodSource | None = None
        if config.static_pod_url:
            # The manifest URL client only for an agent with a manifest URL.
            from minikubelet.sources.url import URLPodSource

            self.url = URLPodSource(config.static_pod_url, config.static_pod_url_header, node_name, clock, metrics,
                                    set_source_pods, parser, check_frequency=config.http_check_frequency)
        self._after_first_sync = after_first_sync

    async def start(self) -> None:
        if parser_wanted(self.static.path, self.url is not None):
            await self.static.parser.prestart()  # nothing to do when the agent's start-up started it
        await self.static.sync()
        if self.url is not None:
            await self.url.sync()
        self._after_first_sync()

    def loops(self) -> Sequence[Loop]:
        return [("static-pods", self.static.run), *([("url-pods", self.url.run)] if self.url is not None else [])]
