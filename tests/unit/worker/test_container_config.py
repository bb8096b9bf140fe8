"""Sandbox and container configs from the pod's views."""

from __future__ import annotations

from typing import Any

from cri.types import (
    ANNOTATION_CONTAINER_KIND,
    ANNOTATION_GRACE_PERIOD,
    ANNOTATION_HASH,
    ANNOTATION_TERMINATION_MESSAGE_POLICY,
    LABEL_POD_UID,
    Mount,
    PortMapping,
)
from minikubelet.base.podview import PodView, container_hash
from minikubelet.worker.container_config import container_config, sandbox_config


def pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "labels": {"app": "web"}},
        "spec": {
            "terminationGracePeriodSeconds": 12,
            "securityContext": {"runAsUser": 1000, "runAsGroup": 2000},
            "initContainers": [{"name": "side", "image": "busybox", "restartPolicy": "Always",
                                "ports": [{"containerPort": 9, "hostPort": 90, "protocol": "UDP"}]}],
            "containers": [{"name": "app", "image": "busybox", "command": ["echo", "$(A)"],
                            "env": [{"name": "A", "value": "hi"}],
                            "securityContext": {"runAsUser": 5, "readOnlyRootFilesystem": True},
                            "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]}],
        },
    }


def test_sandbox_publishes_host_ports_of_every_container() -> None:
    cfg = sandbox_config(PodView.of(pod()), 1, "/logs")
    assert cfg.port_mappings == (
        PortMapping(container_port=9, protocol="UDP", host_port=90, host_ip=""),
        PortMapping(container_port=80, protocol="TCP", host_port=8080, host_ip=""),
    )
    assert (cfg.hostname, cfg.metadata.attempt, cfg.log_directory) == ("web", 1, "/logs/ns_web_u1")
    assert cfg.labels["app"] == "web" and cfg.labels[LABEL_POD_UID] == "u1"
    assert cfg.annotations[ANNOTATION_GRACE_PERIOD] == "12"


def test_container_config_from_the_views() -> None:
    raw = pod()
    view = PodView.of(raw)
    cfg = container_config(
        view, view.container("app"), restart_count=2, mounts=[], field_values={}, resources=None,
        termination_log_host_path="/host/tl",
    )
    assert (cfg.command, cfg.envs) == (("echo", "hi"), (("A", "hi"),))
    sec = cfg.security
    assert (sec.run_as_user, sec.run_as_group, sec.readonly_rootfs, sec.privileged) == (5, 2000, True, False)
    assert cfg.mounts == (Mount(container_path="/dev/termination-log", host_path="/host/tl"),)
    assert cfg.annotations[ANNOTATION_HASH] == container_hash(raw["spec"]["containers"][0])
    assert cfg.annotations[ANNOTATION_CONTAINER_KIND] == "regular"
    assert cfg.annotations[ANNOTATION_TERMINATION_MESSAGE_POLICY] == "File"
    side = container_config(
        view, view.container("side"), restart_count=0, mounts=[], field_values={}, resources=None,
        termination_log_host_path="",
    )
    assert side.annotations[ANNOTATION_CONTAINER_KIND] == "sidecar" and side.mounts == ()
