"""Docker names and labels for sandboxes and containers (cri-dockerd layout)."""

from __future__ import annotations

import pytest

from cri.docker.naming import (
    LABEL_CONTAINER_TYPE,
    LABEL_LOG_PATH,
    LABEL_SANDBOX_ID,
    NameError_,
    ParsedName,
    container_labels,
    extract_labels,
    make_container_name,
    make_labels,
    make_sandbox_name,
    parse_name,
    sandbox_labels,
)
from cri.types import (
    LABEL_CONTAINER_NAME,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    ContainerConfig,
    ContainerMeta,
    PodMeta,
    PodSandboxConfig,
)

POD = PodMeta(name="web", namespace="prod", uid="0b1c-22", attempt=3)


def test_sandbox_and_container_names() -> None:
    assert make_sandbox_name(POD) == "k8s_POD_web_prod_0b1c-22_3"
    assert make_container_name(POD, ContainerMeta("nginx", 5)) == "k8s_nginx_web_prod_0b1c-22_5"


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("/k8s_POD_web_prod_0b1c-22_3", ParsedName("POD", "web", "prod", "0b1c-22", 3)),
        ("k8s_nginx_web_prod_0b1c-22_5", ParsedName("nginx", "web", "prod", "0b1c-22", 5)),
        ("/k8s_nginx_web_prod_uid_0_a1b2c3", ParsedName("nginx", "web", "prod", "uid", 0)),
    ],
)
def test_parse_name_round_trips(name: str, parsed: ParsedName) -> None:
    assert parse_name(name) == parsed


@pytest.mark.parametrize(
    "name",
    ["/nginx", "/k8s_nginx_web_prod_uid", "/k9s_nginx_web_prod_uid_0", "/k8s_nginx_web_prod_uid_x", "/k8s_a_b_c_d_-1"],
)
def test_parse_name_rejects_foreign_names(name: str) -> None:
    with pytest.raises(NameError_):
        parse_name(name)


def test_annotations_round_trip_through_labels() -> None:
    docker_labels = make_labels({"app": "web"}, {"kubernetes.io/config.source": "file"})
    assert docker_labels == {"app": "web", "annotation.kubernetes.io/config.source": "file"}
    assert extract_labels(docker_labels) == ({"app": "web"}, {"kubernetes.io/config.source": "file"})


def test_sandbox_labels_mark_type_and_hide_internal_ones() -> None:
    config = PodSandboxConfig(metadata=POD, labels={"app": "web"}, annotations={"seen": "yes"})
    docker_labels = sandbox_labels(config)
    assert docker_labels[LABEL_CONTAINER_TYPE] == "podsandbox"
    assert docker_labels[LABEL_CONTAINER_NAME] == "POD"
    assert (docker_labels[LABEL_POD_NAME], docker_labels[LABEL_POD_NAMESPACE], docker_labels[LABEL_POD_UID]) == (
        "web",
        "prod",
        "0b1c-22",
    )
    labels, annotations = extract_labels(docker_labels)
    assert labels == {"app": "web", LABEL_POD_NAME: "web", LABEL_POD_NAMESPACE: "prod", LABEL_POD_UID: "0b1c-22"}
    assert annotations == {"seen": "yes"}


def test_container_labels_carry_sandbox_and_log_path() -> None:
    sandbox = PodSandboxConfig(metadata=POD)
    config = ContainerConfig(ContainerMeta("nginx", 1), "nginx:1.25", labels={"tier": "front"})
    docker_labels = container_labels("sb123", config, sandbox, "/var/log/pods/x/nginx/1.log")
    assert docker_labels[LABEL_CONTAINER_TYPE] == "container"
    assert docker_labels[LABEL_SANDBOX_ID] == "sb123"
    assert docker_labels[LABEL_LOG_PATH] == "/var/log/pods/x/nginx/1.log"
    labels, _ = extract_labels(docker_labels)
    # The container name stays visible on app containers (only the sandbox's "POD" is hidden).
    assert labels[LABEL_CONTAINER_NAME] == "nginx"
    assert LABEL_SANDBOX_ID not in labels and LABEL_LOG_PATH not in labels and LABEL_CONTAINER_TYPE not in labels
