"""Storage operations and the volume manager's counts: each set-up and tear-down timed per volume with upstream's
plugin names, the desired and the actual state of the world."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.metrics_node import NodeMetrics, VolumeCountCollector
from minikubelet.volumes.manager import VolumeError, refresh_volumes, setup_volumes, teardown_pod_dir
from minikubelet.volumes.mounter import MountPoint
from minikubelet.volumes.operations import VolumeOperations
from tests.unit.volumes.fake_mounter import FakeMounter

EMPTY, HOST, DOWNWARD = "kubernetes.io/empty-dir", "kubernetes.io/host-path", "kubernetes.io/downward-api"


def pod(volumes: list[dict[str, Any]], uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": "p", "namespace": "ns", "labels": {"a": "1"}},
            "spec": {"volumes": volumes, "containers": []}}


class Env:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.ops = VolumeOperations(NodeMetrics(self.registry))
        self.registry.register(VolumeCountCollector(self.ops.desired_plugins, self.ops.actual_plugins))

    def ops_count(self, plugin: str, operation: str, status: str = "success") -> float:
        return self.registry.get_sample_value("storage_operation_duration_seconds_count", {
            "volume_plugin": plugin, "operation_name": operation, "status": status, "migrated": "false"}) or 0.0

    def volumes(self, plugin: str, state: str) -> float:
        return self.registry.get_sample_value("volume_manager_total_volumes",
                                              {"plugin_name": plugin, "state": state}) or 0.0


@pytest.fixture
def env() -> Env:
    return Env()


def test_set_up_once_then_torn_down(env: Env, tmp_path: Path) -> None:
    root, mounter = str(tmp_path / "root"), FakeMounter()
    spec = pod([{"name": "scratch", "emptyDir": {}}, {"name": "mem", "emptyDir": {"medium": "Memory"}},
                {"name": "h", "hostPath": {"path": str(tmp_path / "data"), "type": "DirectoryOrCreate"}},
                {"name": "info", "downwardAPI": {"defaultMode": 0o644, "items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}])
    setup_volumes(spec, root, mounter, ops=env.ops)
    assert env.ops_count(EMPTY, "volume_mount") == 2 and env.ops_count(HOST, "volume_mount") == 1
    assert env.ops_count(DOWNWARD, "volume_mount") == 1
    assert env.volumes(EMPTY, "actual_state_of_world") == 2 and env.volumes(EMPTY, "desired_state_of_world") == 2
    assert env.volumes(HOST, "actual_state_of_world") == 1 and env.volumes(DOWNWARD, "desired_state_of_world") == 1
    overall = env.registry.get_sample_value("volume_operation_total_seconds_count",
                                            {"plugin_name": EMPTY, "operation_name": "overall_volume_mount"})
    assert overall == 2

    # the next container start: emptyDir and hostPath are already there; the downwardAPI volume is written
    # again, as upstream remounts it on every sync
    setup_volumes(spec, root, mounter, ops=env.ops)
    refresh_volumes(spec, root, ops=env.ops)
    assert env.ops_count(EMPTY, "volume_mount") == 2 and env.ops_count(HOST, "volume_mount") == 1
    assert env.ops_count(DOWNWARD, "volume_mount") == 3
    assert env.volumes(DOWNWARD, "actual_state_of_world") == 1

    env.ops.unwanted("u1")  # terminated: no longer desired, still set up
    assert env.volumes(EMPTY, "desired_state_of_world") == 0 and env.volumes(EMPTY, "actual_state_of_world") == 2
    assert teardown_pod_dir(root, "u1", mounter, env.ops)
    assert env.ops_count(EMPTY, "volume_unmount") == 2 and env.ops_count(HOST, "volume_unmount") == 1
    assert env.ops_count(DOWNWARD, "volume_unmount") == 1
    assert env.volumes(EMPTY, "actual_state_of_world") == 0
    assert list(env.ops.actual_plugins()) == [] and list(env.ops.desired_plugins()) == []


def test_a_failed_set_up_is_counted_as_failed(env: Env, tmp_path: Path) -> None:
    spec = pod([{"name": "h", "hostPath": {"path": str(tmp_path / "missing"), "type": "Directory"}}])
    with pytest.raises(VolumeError):
        setup_volumes(spec, str(tmp_path / "root"), FakeMounter(), ops=env.ops)
    assert env.ops_count(HOST, "volume_mount", "fail-unknown") == 1
    assert env.volumes(HOST, "desired_state_of_world") == 1 and env.volumes(HOST, "actual_state_of_world") == 0


def test_a_tear_down_left_undone_is_counted_as_failed(env: Env, tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    setup_volumes(pod([{"name": "scratch", "emptyDir": {}}]), root, FakeMounter(), ops=env.ops)
    inside = os.path.realpath(tmp_path / "root" / "pods" / "u1" / "volumes")
    busy = FakeMounter(others=[MountPoint(inside, "ext4")])  # somebody else's mount: left, retried later
    assert not teardown_pod_dir(root, "u1", busy, env.ops)
    assert env.ops_count(EMPTY, "volume_unmount", "fail-unknown") == 1
    assert env.volumes(EMPTY, "actual_state_of_world") == 1
