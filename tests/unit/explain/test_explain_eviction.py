"""`explain` of node-pressure eviction: the node's signals against the thresholds, and the rank and usage the
eviction manager's last ranking gave each pod (recorded by the pass that ranked them)."""

from __future__ import annotations

import jsonschema

from cri.fake import FakeRuntime
from minikubelet.events import EventRecorder
from minikubelet.eviction.manager import Settings
from minikubelet.eviction.thresholds import parse_thresholds
from minikubelet.explain.record import Admission, ExplainStore
from minikubelet.services.explain import PodExplainer
from minikubelet.status.manager import StatusManager
from tests.unit.eviction.test_manager import MI, Harness, mkpod, pod_stats, summary
from tests.unit.explain.explained import SCHEMA


async def test_the_ranking_that_evicted_a_pod_is_in_every_ranked_pods_explanation() -> None:
    hog, quiet = mkpod("hog"), mkpod("quiet", "100Mi")
    h = Harness(Settings(parse_thresholds({"memory.available": "100Mi"})), [quiet, hog])
    store = ExplainStore()
    for p in (hog, quiet):
        store.admitted(p["metadata"]["uid"], "default", p["metadata"]["name"], Admission(True, at=h.clock.now()))
    h.m.explain = store
    explainer = PodExplainer(store, h.clock, lambda: h.pods, StatusManager(), EventRecorder(h.clock, "node-1"),
                             FakeRuntime(h.clock), lambda: None, lambda: None, lambda: None, h.m, lambda _uid: None)
    before = await explainer.explain("default", "hog")
    assert before is not None and "rank" not in before["eviction"]

    h.doc = summary(50 * MI, [pod_stats("hog", 700 * MI), pod_stats("quiet", 10 * MI)])
    await h.m.synchronize()
    assert [name for name, _, _ in h.killed] == ["hog"]
    doc = await explainer.explain("default", "hog")
    assert doc is not None
    jsonschema.validate(doc, SCHEMA)
    [memory] = [s for s in doc["eviction"]["signals"] if s["signal"] == "memory.available"]
    assert memory == {"signal": "memory.available", "threshold": "memory.available<100Mi", "hard": True,
                      "available": "50Mi", "capacity": memory["capacity"], "thresholdAmount": "100Mi", "met": True}
    assert doc["eviction"]["nodeConditions"] == ["MemoryPressure"]
    rank = doc["eviction"]["rank"]
    assert (rank["rank"], rank["of"], rank["resource"], rank["usage"]) == (1, 2, "memory", "700Mi")
    quiet_doc = await explainer.explain("default", "quiet")
    assert quiet_doc is not None and quiet_doc["eviction"]["rank"]["rank"] == 2
