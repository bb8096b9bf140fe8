"""configMap volumes (upstream pkg/volume/configmap): the ConfigMap's keys as files, written by the atomic
writer into a directory on the node's disk (upstream wraps a disk emptyDir), and rewritten when it changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from minikubelet.api.pod_objects import (
    ObjectUnavailable,
    PodObjects,
    configmap_binary_data,
    configmap_data,
)
from minikubelet.volumes.atomic_writer import FileProjection

PLUGIN_DIR = "kubernetes.io~configmap"


class ConfigMapVolumeError(Exception):
    pass


def _mode(item: Mapping[str, Any], default_mode: int) -> int:
    mode = item.get("mode")
    return mode if isinstance(mode, int) and not isinstance(mode, bool) else default_mode


def key_to_path_payload(items: Sequence[Mapping[str, Any]], data: Mapping[str, bytes], default_mode: object,
                        optional: bool, missing: str) -> dict[str, FileProjection]:
    """Upstream configmap/secret MakePayload: every key (no items) or the listed ones under their paths; a
    listed key that is absent is `<missing>: <key>` unless the source is optional."""
    if not isinstance(default_mode, int) or isinstance(default_mode, bool):
        raise ConfigMapVolumeError("no defaultMode used, not even the default value for it")
    if not items:
        return {k: FileProjection(v, default_mode) for k, v in data.items()}
    payload: dict[str, FileProjection] = {}
    for item in items:
        key = item.get("key")
        if not isinstance(key, str) or key not in data:
            if optional:
                continue
            raise ConfigMapVolumeError(f"{missing}: {key}")
        payload[str(item.get("path", ""))] = FileProjection(data[key], _mode(item, default_mode))
    return payload


def items_of(source: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = source.get("items")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def collect_data(source: Mapping[str, Any], objects: PodObjects, default_mode: object) -> dict[str, FileProjection]:
    """The files of a configMap volume or projected source (`name`, `items`, `optional`); a missing optional
    ConfigMap is an empty volume. Raises ObjectUnavailable (`configmap "x" not found`) or ConfigMapVolumeError."""
    name = source.get("name")
    optional = source.get("optional") is True
    try:
        cm = objects.configmap(name if isinstance(name, str) else "")
    except ObjectUnavailable as e:
        if not (e.not_found and optional):
            raise
        cm = {}
    data = {k: v.encode() for k, v in configmap_data(cm).items()}
    for k, raw in configmap_binary_data(cm).items():
        data.setdefault(k, raw)  # the API server refuses a key in both
    return key_to_path_payload(items_of(source), data, default_mode, optional,
                               "configmap references non-existent config key")
