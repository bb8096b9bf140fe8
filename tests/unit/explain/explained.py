"""A FakeNode with a prober and `explain` wired as the agent wires it, for the explain tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema

from cri.fake import FakeRuntime
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.explain.client import render_wide
from minikubelet.explain.record import ExplainStore
from minikubelet.services.explain import PodExplainer
from minikubelet.worker.dependencies import CgroupSource
from minikubelet.worker.explain_record import SyncExplainer
from minikubelet.worker.probe_results import ManagerProbeSource
from probes.manager import ProbeManager
from tests.unit.fake_node import IMAGE, FakeNode, running_node

SCHEMA = json.loads((Path(__file__).parents[3] / "docs" / "explain.schema.json").read_text())


class ExplainedNode:
    """A FakeNode with a prober and `explain` wired as the agent wires it (services.explain.explain_pods)."""

    def __init__(self, node: FakeNode, prober: ProbeManager | None = None, cgroups: CgroupSource | None = None) -> None:
        self.node = node
        self.store = ExplainStore()
        self.explainer = PodExplainer(self.store, node.clock, lambda: [*node.workers.pods(),
                                                                       *node.manager.desired.values()],
                                      node.statuses, node.recorder, node.runtime, lambda: prober, lambda: cgroups,
                                      lambda: None, None, lambda _uid: None)
        node.syncer.explain = SyncExplainer(self.store, node.clock, node.container_backoff, node.images,
                                            self.explainer.probe_detail)
        node.manager.explain = self.store

    async def explain(self, name: str = "p") -> dict[str, Any]:
        doc = await self.explainer.explain("default", name)
        assert doc is not None
        jsonschema.validate(doc, SCHEMA)
        render_wide(doc)  # the table renders every document
        return doc

    async def container(self, name: str, pod: str = "p") -> dict[str, Any]:
        doc = await self.explain(pod)
        return next(c for c in doc["decision"]["containers"] if c["name"] == name)


async def explained_node(tmp_path: Path, max_pods: int = 1,
                         cgroups: CgroupSource | None = None) -> AsyncIterator[ExplainedNode]:
    """The prober wakes the node's workers and records on its recorder; the node runs the prober's results."""
    holder: list[FakeNode] = []
    runtime = FakeRuntime(FakeClock(), images=[IMAGE])

    def wake(uid: str) -> None:
        holder[0].workers.wake(uid)

    def event(pod: Pod, etype: str, reason: str, message: str, container: str = "") -> None:
        holder[0].recorder.pod_event(pod, etype, reason, message, container)

    prober = ProbeManager(runtime, runtime.clock, CollectorRegistry(), wake, events=event, rng=lambda: 0.0)
    async with running_node(tmp_path, max_pods=max_pods, runtime=runtime, probes=ManagerProbeSource(prober)) as node:
        holder.append(node)
        yield ExplainedNode(node, prober, cgroups)
    await prober.close()
