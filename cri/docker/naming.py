"""Docker container names and labels for pods, as cri-dockerd lays them out.

Names are deterministic (`k8s_<container>_<pod>_<ns>_<uid>_<attempt>`, with `POD` as the
container part of a sandbox) so a create after a crash finds what already exists. Docker has no
annotations, so CRI annotations travel as labels prefixed with `annotation.`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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

KUBE_PREFIX = "k8s"
SANDBOX_CONTAINER_NAME = "POD"
NAME_DELIMITER = "_"
ANNOTATION_PREFIX = "annotation."

LABEL_CONTAINER_TYPE = "io.kubernetes.docker.type"  # "podsandbox" | "container", as cri-dockerd
CONTAINER_TYPE_SANDBOX = "podsandbox"
CONTAINER_TYPE_CONTAINER = "container"
LABEL_SANDBOX_ID = "io.kubernetes.sandbox.id"
LABEL_LOG_PATH = "io.kubernetes.container.logpath"

# Labels the shim adds for itself; they are not handed back to the caller as pod labels.
INTERNAL_LABEL_KEYS = frozenset({LABEL_CONTAINER_TYPE, LABEL_SANDBOX_ID, LABEL_LOG_PATH})


class NameError_(ValueError):
    """A Docker container name that this agent did not produce."""


@dataclass(frozen=True)
class ParsedName:
    container: str  # "POD" for a sandbox
    pod: str
    namespace: str
    uid: str
    attempt: int


def make_sandbox_name(meta: PodMeta) -> str:
    return NAME_DELIMITER.join(
        (KUBE_PREFIX, SANDBOX_CONTAINER_NAME, meta.name, meta.namespace, meta.uid, str(meta.attempt))
    )


def make_container_name(sandbox: PodMeta, container: ContainerMeta) -> str:
    return NAME_DELIMITER.join(
        (KUBE_PREFIX, container.name, sandbox.name, sandbox.namespace, sandbox.uid, str(container.attempt))
    )


def parse_name(name: str) -> ParsedName:
    """Split a sandbox or container name; Docker reports names with a leading '/'."""
    parts = name.removeprefix("/").split(NAME_DELIMITER)
    # Old kubelets appended a random suffix as a 7th field; cri-dockerd still tolerates it.
    if len(parts) not in (6, 7):
        raise NameError_(f"failed to parse the container name: {name!r}")
    if parts[0] != KUBE_PREFIX:
        raise NameError_(f"container is not managed by kubernetes: {name!r}")
    try:
        attempt = int(parts[5])
    except ValueError as exc:
        raise NameError_(f"failed to parse the attempt in container name {name!r}") from exc
    if attempt < 0:
        raise NameError_(f"negative attempt in container name {name!r}")
    return ParsedName(parts[1], parts[2], parts[3], parts[4], attempt)


def make_labels(labels: Mapping[str, str], annotations: Mapping[str, str]) -> dict[str, str]:
    merged = dict(labels)
    for key, value in annotations.items():
        merged[ANNOTATION_PREFIX + key] = value
    return merged


def extract_labels(docker_labels: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split Docker labels back into (CRI labels, CRI annotations), dropping the shim's own."""
    is_sandbox = docker_labels.get(LABEL_CONTAINER_TYPE) == CONTAINER_TYPE_SANDBOX
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    for key, value in docker_labels.items():
        if key in INTERNAL_LABEL_KEYS:
            continue
        if is_sandbox and key == LABEL_CONTAINER_NAME:
            continue
        if key.startswith(ANNOTATION_PREFIX):
            annotations[key.removeprefix(ANNOTATION_PREFIX)] = value
        else:
            labels[key] = value
    return labels, annotations


def sandbox_labels(config: PodSandboxConfig) -> dict[str, str]:
    labels = make_labels(config.labels, config.annotations)
    labels[LABEL_POD_NAME] = config.metadata.name
    labels[LABEL_POD_NAMESPACE] = config.metadata.namespace
    labels[LABEL_POD_UID] = config.metadata.uid
    labels[LABEL_CONTAINER_TYPE] = CONTAINER_TYPE_SANDBOX
    # cri-dockerd marks the sandbox container "POD"; extract_labels hides it again.
    labels[LABEL_CONTAINER_NAME] = SANDBOX_CONTAINER_NAME
    return labels


def container_labels(
    sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig, log_path: str
) -> dict[str, str]:
    labels = make_labels(config.labels, config.annotations)
    labels[LABEL_POD_NAME] = sandbox_config.metadata.name
    labels[LABEL_POD_NAMESPACE] = sandbox_config.metadata.namespace
    labels[LABEL_POD_UID] = sandbox_config.metadata.uid
    labels[LABEL_CONTAINER_NAME] = config.metadata.name
    labels[LABEL_CONTAINER_TYPE] = CONTAINER_TYPE_CONTAINER
    labels[LABEL_SANDBOX_ID] = sandbox_id
    labels[LABEL_LOG_PATH] = log_path
    return labels
