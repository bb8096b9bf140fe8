"""Static pods from manifest files: parsing and the identity the kubelet's file source gives them.

Pure: no file system access; the source that watches the directory passes bytes and names in.
Upstream reference: pkg/kubelet/config/common.go (applyDefaults, generatePodName) and file.go.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from datetime import UTC, datetime
from typing import Any

import yaml

from minikubelet.api.defaults import apply_defaults
from minikubelet.api.schema import check_types
from minikubelet.api.validation import FieldError, format_errors, validate_manifest, validate_pod

CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
CONFIG_HASH_ANNOTATION = "kubernetes.io/config.hash"
CONFIG_SEEN_ANNOTATION = "kubernetes.io/config.seen"
CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FILE_SOURCE = "file"
# Upstream refuses larger manifests (maxConfigLength in pkg/kubelet/config/common.go).
MAX_MANIFEST_BYTES = 10 * (1 << 20)


class ManifestError(ValueError):
    """A manifest file that does not hold exactly one valid Pod; the message names the file."""

    def __init__(self, filename: str, message: str, errors: list[FieldError] | None = None) -> None:
        super().__init__(f"{filename}: {message}")
        self.filename = filename
        self.errors = errors or []


def should_read(filename: str) -> bool:
    """Whether the file source reads this file: the kubelet ignores names starting with '.'."""
    return not os.path.basename(filename).startswith(".")


def parse_manifest(data: bytes, filename: str) -> dict[str, Any]:
    """The single Pod object in a YAML or JSON manifest; raises ManifestError otherwise."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(filename, f"manifest is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(filename, f"not valid UTF-8 (byte {exc.start})") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(filename, f"not valid YAML or JSON: {_one_line(str(exc))}") from None
    except RecursionError:
        raise ManifestError(filename, "not valid YAML or JSON: nested too deeply") from None
    if not docs:
        raise ManifestError(filename, "no Pod found: the file is empty")
    if len(docs) > 1:
        raise ManifestError(filename, f"holds {len(docs)} documents; a static pod manifest must hold exactly one Pod")
    doc = docs[0]
    if not isinstance(doc, dict):
        raise ManifestError(filename, f"must hold a Pod object, got a {_yaml_kind(doc)}")
    if not _json_safe(doc):
        raise ManifestError(filename, "holds YAML values with no JSON form (non-string keys, dates or binary)")
    kind = doc.get("kind")
    if kind != "Pod":
        if kind == "PodList" or (isinstance(kind, str) and kind.endswith("List")):
            raise ManifestError(filename, f"kind: must be \"Pod\", got {kind!r} (lists are not supported)")
        raise ManifestError(filename, f"kind: must be \"Pod\", got {kind!r}")
    if doc.get("apiVersion") != "v1":
        raise ManifestError(filename, f"apiVersion: must be \"v1\", got {doc.get('apiVersion')!r}")
    return doc


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _yaml_kind(value: object) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), type(value).__name__)


def _json_safe(value: object, depth: int = 0) -> bool:
    # YAML allows what JSON cannot carry (timestamps, binary, integer keys); the API's YAML->JSON
    # conversion rejects those, and so do we.
    if depth > 200:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_safe(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_safe(v, depth + 1) for v in value)
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    return value is None or isinstance(value, str | int | bool)


def canonical_json(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def static_pod_uid(defaulted_pod: dict[str, Any], node_name: str, source_path: str) -> str:
    """md5 hex of canonical JSON(defaulted manifest) + "host:<node>" + "file:<path>".

    Upstream hashes the decoded, defaulted pod (hash.DeepHashObject) and then writes the same
    host/file strings; Go's object dump cannot be reproduced, so the canonical JSON stands in.
    """
    hasher = hashlib.md5(usedforsecurity=False)
    hasher.update(canonical_json(defaulted_pod))
    hasher.update(f"host:{node_name}".encode())
    hasher.update(f"file:{source_path}".encode())
    return hasher.hexdigest()


def rfc3339_nano(ts: float) -> str:
    """Go's time.RFC3339Nano in local-independent UTC (trailing zeros dropped, like Go)."""
    dt = datetime.fromtimestamp(ts, tz=UTC)
    frac = f"{dt.microsecond:06d}000".rstrip("0")
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


class StaticPod(dict[str, Any]):
    """The pod dict, with the API server's warnings about its manifest (unknown fields)."""

    warnings: list[str]


def make_static_pod(
    pod: dict[str, Any],
    node_name: str,
    source_path: str,
    seen: float | None = None,
) -> StaticPod:
    """The pod the kubelet runs for a manifest: defaulted, named for the node, with a stable UID.

    `seen` (epoch seconds) sets kubernetes.io/config.seen. Raises ManifestError (naming the file
    and listing FieldErrors) when the result is not a valid pod. `.warnings` on the result name
    the manifest's unknown fields (the pod still runs, as the API server would accept it).
    """
    types = check_types(pod)
    if types.errors:
        # The manifest as written, so that every error is listed before its types get in the way.
        errors = validate_manifest(pod).errors
        raise ManifestError(source_path, f"invalid pod: {format_errors(errors)}", errors)
    out = apply_defaults(copy.deepcopy(pod))
    metadata = out.get("metadata")
    if metadata is None:
        metadata = out["metadata"] = {}
    if not isinstance(metadata, dict):
        raise ManifestError(source_path, "metadata: must be an object")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(source_path, "invalid pod: [metadata.name: Required value: name or generateName is required]",
                            [FieldError("metadata.name", "Required value: name or generateName is required", "FieldValueRequired")])
    annotations = metadata.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        raise ManifestError(source_path, "metadata.annotations: must be an object")
    uid = metadata.get("uid")
    if not uid:
        # An explicit metadata.uid in the manifest is kept, as upstream does.
        uid = static_pod_uid(out, node_name, source_path)
        metadata["uid"] = uid
    metadata["name"] = f"{name}-{node_name.lower()}"
    if not metadata.get("namespace"):
        metadata["namespace"] = "default"
    annotations = metadata["annotations"] = dict(annotations or {})
    annotations[CONFIG_HASH_ANNOTATION] = str(uid)
    annotations[CONFIG_SOURCE_ANNOTATION] = FILE_SOURCE
    if seen is not None:
        annotations[CONFIG_SEEN_ANNOTATION] = rfc3339_nano(seen)
    spec = out.get("spec")
    if isinstance(spec, dict):
        spec["nodeName"] = node_name
        _add_or_update_toleration(spec, {"operator": "Exists", "effect": "NoExecute"})
    status = out.get("status")
    out["status"] = {**status, "phase": "Pending"} if isinstance(status, dict) else {"phase": "Pending"}
    # The rules run on the pod as built, as the kubelet's file source does (the node suffix counts).
    errors = validate_pod(out)
    if errors:
        raise ManifestError(source_path, f"invalid pod: {format_errors(errors)}", errors)
    result = StaticPod(out)
    result.warnings = types.warnings
    return result


def _add_or_update_toleration(spec: dict[str, Any], toleration: dict[str, Any]) -> None:
    """Upstream helper.AddOrUpdateTolerationInPod: a matching toleration (same key, operator,
    value, effect) is replaced by this one; otherwise it is appended."""
    tolerations = spec.get("tolerations")
    result: list[Any] = []
    replaced = False
    for existing in tolerations if isinstance(tolerations, list) else []:
        if isinstance(existing, dict) and _matches(existing, toleration):
            if not replaced:
                result.append(dict(toleration))
            replaced = True
            continue
        result.append(existing)
    if not replaced:
        result.append(dict(toleration))
    spec["tolerations"] = result


def _matches(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all((a.get(k) or "") == (b.get(k) or "") for k in ("key", "operator", "value", "effect"))
