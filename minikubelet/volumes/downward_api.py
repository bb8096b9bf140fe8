"""downwardAPI volumes (upstream pkg/volume/downwardapi): pod fields and container resources as files,
written by the atomic writer into a memory-backed emptyDir, and rewritten when the pod changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from minikubelet.api.names import qualified_name_errors
from minikubelet.api.resource_fields import ResourceFieldError, resource_field_value
from minikubelet.base.goformat import go_quote
from minikubelet.volumes.atomic_writer import FileProjection

PLUGIN_DIR = "kubernetes.io~downward-api"


class DownwardAPIError(Exception):
    pass


def format_map(values: Mapping[str, str]) -> str:
    """Upstream fieldpath.FormatMap: key="value" lines (Go-quoted values), sorted by key."""
    return "\n".join(f"{k}={go_quote(values[k])}" for k in sorted(values))


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _str_map(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _split_subscript(field_path: str) -> tuple[str, str] | None:
    """Upstream SplitMaybeSubscriptedPath: "metadata.labels['k']" -> ("metadata.labels", "k")."""
    if not field_path.endswith("']"):
        return None
    path, sep, key = field_path[:-2].partition("['")
    return (path, key) if sep and path else None


def field_path_value(pod: Mapping[str, Any], field_path: str) -> str:
    """Upstream fieldpath.ExtractFieldPathAsString: the fields a downwardAPI volume can show."""
    meta = _meta(pod)
    split = _split_subscript(field_path)
    if split is not None:
        path, key = split
        if path == "metadata.annotations":
            errors = qualified_name_errors(key.lower())
            values = _str_map(meta.get("annotations"))
        elif path == "metadata.labels":
            errors = qualified_name_errors(key)
            values = _str_map(meta.get("labels"))
        else:
            raise DownwardAPIError(f'fieldPath "{path}" does not support subscript')
        if errors:
            raise DownwardAPIError(f"invalid key subscript in {field_path}: {';'.join(errors)}")
        return values.get(key, "")
    if field_path == "metadata.annotations":
        return format_map(_str_map(meta.get("annotations")))
    if field_path == "metadata.labels":
        return format_map(_str_map(meta.get("labels")))
    if field_path in ("metadata.name", "metadata.namespace", "metadata.uid"):
        value = meta.get(field_path.split(".")[1])
        return value if isinstance(value, str) else ""
    raise DownwardAPIError(f"unsupported fieldPath: {field_path}")


def _mode(item: Mapping[str, Any], default_mode: int) -> int:
    mode = item.get("mode")
    return mode if isinstance(mode, int) and not isinstance(mode, bool) else default_mode


def _resource_value(ref: Mapping[str, Any], pod: Mapping[str, Any], allocatable: Mapping[str, Fraction]) -> str:
    name = ref.get("containerName")
    if not isinstance(name, str) or not name:
        raise DownwardAPIError(f"resourceFieldRef {ref.get('resource')}: containerName is required in a volume")
    try:
        return resource_field_value(ref, pod, {}, allocatable)
    except ResourceFieldError as e:
        raise DownwardAPIError(str(e)) from e


def collect_data(items: Sequence[Mapping[str, Any]], pod: Mapping[str, Any], default_mode: object,
                 allocatable: Mapping[str, Fraction]) -> dict[str, FileProjection]:
    """Upstream CollectData: path -> content and mode; every failing item is reported, not just the first."""
    if not isinstance(default_mode, int) or isinstance(default_mode, bool):
        raise DownwardAPIError("no defaultMode used, not even the default value for it")
    errors: list[str] = []
    data: dict[str, FileProjection] = {}
    for item in items:
        content = b""
        field_ref = item.get("fieldRef")
        resource_ref = item.get("resourceFieldRef")
        try:
            if isinstance(field_ref, dict):
                content = field_path_value(pod, str(field_ref.get("fieldPath", ""))).encode()
            elif isinstance(resource_ref, dict):
                content = _resource_value(resource_ref, pod, allocatable).encode()
        except DownwardAPIError as e:
            errors.append(str(e))
        data[str(item.get("path", ""))] = FileProjection(content, _mode(item, default_mode))
    if errors:
        raise DownwardAPIError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return data


def items_of(source: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = source.get("items")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
