"""A pod update (new labels, same UID: what an API-server pod gets; a static pod gets a new UID instead) rewrites
its downwardAPI files through the pod worker, without restarting anything; removal unmounts the volume."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from minikubelet.api.defaults import apply_defaults
from minikubelet.base.podview import Pod
from tests.unit.fake_node import FakeNode, make_pod
from tests.unit.volumes.fake_mounter import FakeMounter


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[tuple[FakeNode, FakeMounter]]:
    n = FakeNode(tmp_path)
    mounter = FakeMounter()
    n.syncer.containers.mounter = mounter
    try:
        yield n, mounter
    finally:
        await n.close()


def labelled(labels: dict[str, str], extra_volume: dict[str, Any] | None = None) -> Pod:
    volumes: list[dict[str, Any]] = [{"name": "info", "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]
    if extra_volume:
        volumes.append(extra_volume)
    pod = make_pod(containers=[{"name": "app", "image": "busybox:1.36",
                                "volumeMounts": [{"name": "info", "mountPath": "/info"}]}], volumes=volumes)
    pod = copy.deepcopy(pod)
    pod["metadata"]["labels"] = labels
    return pod


async def test_label_change_rewrites_the_file_and_removal_unmounts(node: tuple[FakeNode, FakeMounter],
                                                                  tmp_path: Path) -> None:
    n, mounter = node
    n.config.set_source_pods("api", [labelled({"v": "1"})])
    await n.settle()
    assert n.phase() == "Running"
    labels = tmp_path / "pods/uid-1/volumes/kubernetes.io~downward-api/info/labels"
    assert labels.read_text() == 'v="1"'
    first = n.runtime.container_id("app")

    n.config.set_source_pods("api", [labelled({"v": "2", "w": "x"})])
    await n.settle()
    assert labels.read_text() == 'v="2"\nw="x"'
    assert n.runtime.container_id("app") == first and n.container_state("app")["restartCount"] == 0

    n.config.set_source_pods("api", [])
    await n.advance(35)
    assert "uid-1" in n.finished
    assert mounter.mounted == [] and mounter.unmounted == [str(labels.parent)]
    assert not (tmp_path / "pods" / "uid-1").exists()


async def test_an_unserved_volume_is_refused_with_an_event_and_a_status_reason(
        node: tuple[FakeNode, FakeMounter]) -> None:
    n, mounter = node
    token = {"name": "token", "projected": {"sources": [{"clusterTrustBundle": {"path": "t", "signerName": "x"}}]}}
    n.config.set_source_pods("api", [labelled({}, token)])
    await n.settle()
    message = ('MountVolume.SetUp failed for volume "token" : sources[0]: projected clusterTrustBundle sources are '
               "not supported yet; only downwardAPI, configMap, secret and serviceAccountToken sources can be served")
    assert ("FailedMount", message) in n.events()
    waiting = n.container_state("app")["state"]["waiting"]
    assert waiting == {"reason": "CreateContainerConfigError", "message": message}
    assert n.runtime.running() == [] and mounter.mounted == []


async def test_a_volume_served_later_clears_the_refusal_of_containers_not_started_yet(
        node: tuple[FakeNode, FakeMounter]) -> None:
    n, _ = node
    token = {"name": "extra", "projected": {"sources": [{"configMap": {"name": "cm"}}]}}
    pod = labelled({}, token)
    pod["spec"]["initContainers"] = [{"name": "wait", "image": "busybox:1.36"}]  # runs until killed
    n.config.set_source_pods("api", [make_pod_like(pod)])
    await n.settle()
    assert n.container_state("app")["state"]["waiting"]["reason"] == "CreateContainerConfigError"
    pod["spec"]["volumes"][1] = {"name": "extra", "emptyDir": {}}
    n.config.set_source_pods("api", [make_pod_like(pod)])
    await n.advance(11)
    assert "running" in n.container_state("wait")["state"]
    assert n.container_state("app")["state"]["waiting"]["reason"] == "PodInitializing"


def make_pod_like(pod: Pod) -> Pod:
    return apply_defaults(copy.deepcopy(pod))


async def test_a_pod_adopted_after_an_agent_restart_is_refreshed_too(node: tuple[FakeNode, FakeMounter],
                                                                     tmp_path: Path) -> None:
    n, mounter = node
    n.config.set_source_pods("api", [labelled({"v": "1"})])
    await n.settle()
    first = n.runtime.container_id("app")
    await n.close()
    again = FakeNode(tmp_path, runtime=n.runtime)  # a new agent on the same engine and root dir
    again.syncer.containers.mounter = mounter
    try:
        again.config.set_source_pods("api", [labelled({"v": "2"})])
        await again.settle()
        assert again.runtime.container_id("app") == first  # adopted, not restarted
        labels = tmp_path / "pods/uid-1/volumes/kubernetes.io~downward-api/info/labels"
        assert labels.read_text() == 'v="2"'
    finally:
        await again.close()
