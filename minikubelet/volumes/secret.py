"""secret volumes (upstream pkg/volume/secret): the Secret's keys as files, written by the atomic writer into
a memory-backed emptyDir, so that a Secret never reaches the node's disk; rewritten when it changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minikubelet.api.pod_objects import ObjectUnavailable, PodObjects, secret_data
from minikubelet.volumes.atomic_writer import FileProjection
from minikubelet.volumes.configmap import items_of, key_to_path_payload

PLUGIN_DIR = "kubernetes.io~secret"


def collect_data(source: Mapping[str, Any], objects: PodObjects, default_mode: object,
                 name_key: str = "secretName") -> dict[str, FileProjection]:
    """The files of a secret volume (`secretName`) or projected source (`name`); a missing optional Secret is
    an empty volume. Raises ObjectUnavailable (`secret "x" not found`) or ConfigMapVolumeError."""
    name = source.get(name_key)
    optional = source.get("optional") is True
    try:
        secret = objects.secret(name if isinstance(name, str) else "")
    except ObjectUnavailable as e:
        if not (e.not_found and optional):
            raise
        secret = {}
    return key_to_path_payload(items_of(source), secret_data(secret), default_mode, optional,
                               "references non-existent secret key")
