"""The status manager: one versioned status per pod, served as a PodList."""

from __future__ import annotations

from typing import Any

from minikubelet.status.manager import StatusManager


def pod(name: str, uid: str, ns: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": uid}, "spec": {"containers": []},
            "status": {"phase": "stale"}}


def test_versions_grow_only_on_change_and_listeners_hear_each_change() -> None:
    sm = StatusManager()
    heard: list[tuple[str, str | None]] = []
    sm.add_listener(lambda p, s: heard.append((p["metadata"]["uid"], s["phase"] if s else None)))
    p = pod("a", "1")
    sm.set_pod_status(p, {"phase": "Pending"})
    v1 = sm.version
    sm.set_pod_status(p, {"phase": "Pending"})
    assert sm.version == v1
    sm.set_pod_status(p, {"phase": "Running"})
    assert sm.version == v1 + 1 and sm.get("1") is not None and sm.get("1").version == sm.version  # type: ignore[union-attr]
    sm.remove_pod("1")
    sm.remove_pod("1")
    assert sm.get_pod_status("1") is None and sm.version == v1 + 2
    assert heard == [("1", "Pending"), ("1", "Running"), ("1", None)]


def test_pod_list_is_sorted_and_carries_the_managed_status() -> None:
    sm = StatusManager()
    sm.set_pod_status(pod("b", "2"), {"phase": "Running"})
    sm.set_pod_status(pod("a", "1", "kube-system"), {"phase": "Failed"})
    sm.set_pod_status(pod("a", "3"), {"phase": "Pending"})
    items = sm.pod_list()
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [
        ("default", "a"), ("default", "b"), ("kube-system", "a")]
    assert [i["status"]["phase"] for i in items] == ["Pending", "Running", "Failed"]
    assert all(i["apiVersion"] == "v1" and i["kind"] == "Pod" for i in items)


def test_pod_list_hands_out_one_item_per_status_version() -> None:
    """/pods keeps each item's JSON while the item is the same object: a pod whose status did not change keeps
    its item, a changed or removed one does not."""
    sm = StatusManager()
    a, b = pod("a", "1"), pod("b", "2")
    sm.set_pod_status(a, {"phase": "Running"})
    sm.set_pod_status(b, {"phase": "Pending"})
    first = sm.pod_list()
    sm.set_pod_status(b, {"phase": "Running"})
    second = sm.pod_list()
    assert second[0] is first[0] and second[1] is not first[1] and second[1]["status"]["phase"] == "Running"
    sm.set_pod_status({**a, "metadata": {**a["metadata"], "labels": {"x": "y"}}}, {"phase": "Running"})
    third = sm.pod_list()
    assert third[0] is not second[0] and third[0]["metadata"]["labels"] == {"x": "y"} and third[1] is second[1]
    sm.remove_pod("2")
    assert [i["metadata"]["name"] for i in sm.pod_list()] == ["a"]


def test_normalize_status_caps_termination_messages_and_sorts_as_upstream() -> None:
    """Upstream status_manager normalizeStatus: 12 KiB of termination messages per pod shared evenly by its
    containers (state and lastState); containerStatuses sorted by name (D6), init statuses in spec order."""
    pod_: dict[str, Any] = {"metadata": {"name": "p", "uid": "1"},
                            "spec": {"initContainers": [{"name": "z-init"}, {"name": "a-init"}],
                                     "containers": [{"name": "web"}, {"name": "app"}]}}
    big = "x" * 10000
    term: dict[str, Any] = {"terminated": {"exitCode": 1, "message": big}}
    status: dict[str, Any] = {"containerStatuses": [{"name": "web", "state": term, "lastState": term},
                                    {"name": "app", "state": {"running": {}}, "lastState": {}}],
              "initContainerStatuses": [{"name": "a-init", "state": term}, {"name": "z-init", "state": term}]}
    sm = StatusManager()
    sm.set_pod_status(pod_, status)
    out = sm.get_pod_status("1")
    assert out is not None
    assert [c["name"] for c in out["containerStatuses"]] == ["app", "web"]
    assert [c["name"] for c in out["initContainerStatuses"]] == ["z-init", "a-init"]
    web = out["containerStatuses"][1]
    assert len(web["state"]["terminated"]["message"]) == 12 * 1024 // 4
    assert len(web["lastState"]["terminated"]["message"]) == 12 * 1024 // 4
    assert status["containerStatuses"][0]["state"]["terminated"]["message"] == big  # the input is not changed


def test_a_newer_pod_object_with_the_same_status_keeps_the_status_version() -> None:
    """upstream updateStatusInternal skips an equal status: nothing for the API sync; `/pods` shows the new
    object (its labels, resourceVersion)."""
    sm = StatusManager()
    heard: list[str] = []
    sm.add_listener(lambda p, s: heard.append(p["metadata"]["uid"]))
    sm.set_pod_status(pod("a", "1"), {"phase": "Running"})
    entry_version, pods_version = sm.get("1").version, sm.version  # type: ignore[union-attr]
    newer = pod("a", "1")
    newer["metadata"]["labels"] = {"app": "x"}
    sm.set_pod_status(newer, {"phase": "Running"})
    assert sm.get("1").version == entry_version and sm.get("1").pod is newer  # type: ignore[union-attr]
    assert sm.version == pods_version + 1 and sm.pod_list()[0]["metadata"]["labels"] == {"app": "x"}
    assert heard == ["1"]


def test_updateStatusInternal_keeps_the_start_time_the_api_or_the_cache_has() -> None:
    """upstream updateStatusInternal: the old status's StartTime (the cached one, else the API pod's) is kept."""
    sm = StatusManager()
    p = pod("a", "1")
    p["status"] = {"phase": "Running", "startTime": "2026-11-28T15:00:00Z"}  # written by the agent before a restart
    sm.set_pod_status(p, {"phase": "Running", "startTime": "2026-11-28T16:00:00Z"})
    assert sm.get_pod_status("1") == {"phase": "Running", "startTime": "2026-11-28T15:00:00Z"}
    q = pod("b", "2")
    sm.set_pod_status(q, {"phase": "Pending", "startTime": "2026-11-28T16:00:00Z"})
    sm.set_pod_status(q, {"phase": "Running", "startTime": "2026-11-28T16:00:09Z"})
    assert sm.get_pod_status("2") == {"phase": "Running", "startTime": "2026-11-28T16:00:00Z"}
