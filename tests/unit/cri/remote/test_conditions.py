"""CRI Status conditions -> the node's Ready errors, as the kubelet's updateRuntimeUp words them."""

from __future__ import annotations

import pytest

from cri.conditions import RuntimeCondition, condition_errors
from cri.remote.client import socket_path


def test_ready_runtime_has_no_errors() -> None:
    ok = [RuntimeCondition("RuntimeReady", True), RuntimeCondition("NetworkReady", True)]
    assert condition_errors(ok) == (True, (), ())


def test_network_not_ready_keeps_the_runtime_ready() -> None:
    conditions = [RuntimeCondition("RuntimeReady", True),
                  RuntimeCondition("NetworkReady", False, "NetworkPluginNotReady",
                                   "Network plugin returns error: cni plugin not initialized")]
    assert condition_errors(conditions) == (True, (), (
        "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
        "message:Network plugin returns error: cni plugin not initialized",))


def test_missing_conditions_are_not_ready() -> None:
    assert condition_errors([]) == (False, ("container runtime not ready: <nil>",),
                                    ("container runtime network not ready: <nil>",))


def test_endpoints() -> None:
    assert socket_path("unix:///run/containerd/containerd.sock") == "/run/containerd/containerd.sock"
    assert socket_path("/run/crio/crio.sock") == "/run/crio/crio.sock"



@pytest.mark.parametrize("bad", ["tcp://127.0.0.1:1234", "unix://relative.sock", "npipe:////./pipe/x"])
def test_unsupported_endpoints(bad: str) -> None:
    with pytest.raises(ValueError, match="CRI endpoint"):
        socket_path(bad)


def test_the_agent_picks_its_runtime_by_endpoint() -> None:
    from cri.endpoint import speaks_docker_api

    assert speaks_docker_api("unix:///var/run/docker.sock")
    assert speaks_docker_api("unix:///run/mkltest/docker.sock")
    assert not speaks_docker_api("unix:///run/containerd/containerd.sock")
    assert not speaks_docker_api("unix:///run/cri-dockerd.sock")  # cri-dockerd speaks CRI
