"""The source merge (upstream config.PodConfig): snapshots in, ADD/UPDATE/REMOVE out, one pod per uid."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from minikubelet.sources.merge import PodConfig, PodOp, PodUpdate


def pod(name: str, uid: str, source: str = "file", image: str = "busybox") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": uid,
                         "annotations": {"kubernetes.io/config.source": source}},
            "spec": {"containers": [{"name": "c", "image": image}]}}


def collect() -> tuple[PodConfig, list[PodUpdate]]:
    seen: list[PodUpdate] = []
    return PodConfig(seen.append), seen


def ops(updates: list[PodUpdate]) -> list[tuple[str, list[str]]]:
    return [(u.op.value, [p["metadata"]["name"] for p in u.pods]) for u in updates]


def test_snapshots_become_add_update_remove() -> None:
    cfg, seen = collect()
    a, b = pod("a", "1"), pod("b", "2")
    cfg.set_source_pods("file", [a, b])
    assert ops(seen) == [("ADD", ["a", "b"])]
    seen.clear()
    cfg.set_source_pods("file", [a, b])
    assert seen == []  # nothing changed
    b2 = copy.deepcopy(b)
    b2["metadata"]["labels"] = {"x": "y"}
    cfg.set_source_pods("file", [b2, pod("c", "3")])
    assert ops(seen) == [("REMOVE", ["a"]), ("ADD", ["c"]), ("UPDATE", ["b"])]
    assert cfg.sources_ready == {"file"}


def test_sources_are_independent() -> None:
    cfg, seen = collect()
    cfg.set_source_pods("file", [pod("a", "1")])
    cfg.set_source_pods("http", [pod("b", "2", "http")])
    seen.clear()
    cfg.set_source_pods("http", [])
    assert ops(seen) == [("REMOVE", ["b"])]
    assert [p["metadata"]["name"] for p in cfg.pods()] == ["a"]


def test_uid_held_by_another_source_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    cfg, seen = collect()
    cfg.set_source_pods("file", [pod("a", "same")])
    seen.clear()
    with caplog.at_level(logging.ERROR):
        cfg.set_source_pods("http", [pod("intruder", "same", "http://x/pod.yaml")])
        cfg.set_source_pods("http", [pod("intruder", "same", "http://x/pod.yaml")])
    assert seen == []
    refusals = [r for r in caplog.records if "duplicate uid" in r.getMessage()]
    assert len(refusals) == 1  # once per change, not once per snapshot
    why = refusals[0].__dict__["kv"]["error"]
    assert "intruder_default(same) from http://x/pod.yaml" in why and "a_default(same) from file" in why
    # once the holder is gone the other source's pod is accepted
    cfg.set_source_pods("file", [])
    cfg.set_source_pods("http", [pod("intruder", "same", "http")])
    assert ops(seen) == [("REMOVE", ["a"]), ("ADD", ["intruder"])]


def test_within_a_source_the_running_pod_keeps_its_uid() -> None:
    cfg, seen = collect()
    cfg.set_source_pods("file", [pod("a", "1")])
    seen.clear()
    # a second manifest claims the uid and sorts first: the pod that already runs keeps it
    cfg.set_source_pods("file", [pod("aardvark", "1"), pod("a", "1")])
    assert seen == []
    assert [p["metadata"]["name"] for p in cfg.pods()] == ["a"]


def test_first_pod_wins_a_uid_nobody_holds_yet() -> None:
    cfg, seen = collect()
    cfg.set_source_pods("file", [pod("x", "1"), pod("y", "1")])
    assert ops(seen) == [("ADD", ["x"])]
    assert seen[0].op is PodOp.ADD and seen[0].source == "file"
